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
# the second waits for the first, then finds the stamp.
lock="${TMPDIR:-/tmp}/hilo-node-npm-ci.$(printf '%s' "$DIR" | cksum | cut -d ' ' -f 1).lock"
(
  flock -w 300 9 || { echo "clients/node: waited 300 s for $lock" >&2; exit 1; }
  if [ -f "$stamp" ] && cmp -s "$stamp" "$DIR/package-lock.json" &&
     [ -x "$DIR/node_modules/.bin/tsc" ]; then
    exit 0
  fi
  echo "clients/node: npm ci" >&2
  (cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  cp "$DIR/package-lock.json" "$stamp"
) 9>"$lock"
