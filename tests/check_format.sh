#!/bin/sh
# Fails, listing the files, if any tracked C++ source differs from what
# clang-format makes of it under the repository's .clang-format.
set -eu
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format is not installed (Debian package clang-format)"
  exit 1
fi
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || true)
if [ -z "$files" ]; then
  echo "check_format: no git checkout here; nothing to check"
  exit 77
fi
bad=""
for f in $files; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad="$bad $f"
  fi
done
if [ -n "$bad" ]; then
  echo "check_format: not clang-formatted (run clang-format -i on them):$bad"
  exit 1
fi
echo "check_format: $(echo "$files" | wc -l) files formatted"
