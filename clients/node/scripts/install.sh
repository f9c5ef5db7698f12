#!/bin/sh
# Installs clients/node/node_modules exactly as package-lock.json pins it
# (npm ci; never rewrites the lockfile). Skipped when node_modules was
# installed from this very lockfile. npm fills its cache on the way, which
# the offline-install test relies on.
set -eu
DIR=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
stamp="$DIR/node_modules/.hilo-lock-stamp"
if [ -f "$stamp" ] && cmp -s "$stamp" "$DIR/package-lock.json" &&
   [ -x "$DIR/node_modules/.bin/tsc" ]; then
  exit 0
fi
# Builds that run at once (the tests, the conformance driver) install once:
# the second waits for the first, then finds the stamp. The lock is taken
# on this checkout's clients/node directory itself (opened read-only), so
# two checkouts never wait for each other and no lock file is left behind
# (npm ci replaces node_modules, so the lock cannot live in there).
# shellcheck disable=SC2094  # fd 9 only holds the lock; nothing is read
(
  flock -w 300 9 || { echo "clients/node: waited 300 s for the lock on $DIR" >&2; exit 1; }
  if [ -f "$stamp" ] && cmp -s "$stamp" "$DIR/package-lock.json" &&
     [ -x "$DIR/node_modules/.bin/tsc" ]; then
    exit 0
  fi
  echo "clients/node: npm ci" >&2
  (cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  cp "$DIR/package-lock.json" "$stamp"
) 9<"$DIR"
