#!/bin/sh
# Fails when building and testing changed the source tree: a tracked file
# modified (a rewritten lockfile, a formatter run) or an untracked file that
# .gitignore does not cover (a test's leftovers). The README's test command
# ends with it, so CI catches both.
set -eu
cd "$(dirname "$0")/.."
changes=$(git status --porcelain --untracked-files=all)
if [ -n "$changes" ]; then
  echo "check-clean-tree: the build or the tests changed the tree:" >&2
  echo "$changes" >&2
  exit 1
fi
echo "check-clean-tree: the tree is as checked out"
