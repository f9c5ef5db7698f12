#!/bin/sh
# Builds the package into OUT_DIR and runs its tests (node --test) against
# SERVER_BIN. Used by the CTest test lang.node_client.
#
#   clients/node/scripts/test.sh SERVER_BIN OUT_DIR
set -eu
DIR=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
if [ $# -ne 2 ]; then
  echo "usage: $0 SERVER_BIN OUT_DIR" >&2
  exit 2
fi
"$DIR/build.sh" "$2"
OUT=$(CDPATH='' cd -- "$2" && pwd)
export HILO_SERVER_BIN="$1" HILO_NODE_PKG="$OUT/package" HILO_NODE_OUT="$OUT"
exec node --test --test-concurrency=1 "$DIR"/test/*.test.mjs
