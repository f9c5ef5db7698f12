#!/bin/sh
# Builds the Node conformance driver offline: the hilo-client package (its
# clients/node/build.sh, npm ci from package-lock.json) into OUT_DIR/client,
# and OUT_DIR/driver, a wrapper that runs driver.mjs against it.
#
#   clients/conformance/drivers/node/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR (scripts/gen-stubs.sh's output) is accepted for the runner's sake
# and not read: the client embeds the service description from
# proto/hilo/v1/hilo.proto itself.
set -eu
HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH='' cd -- "$HERE/../../../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
OUT=$(hilo_dir "$2")
"$ROOT/clients/node/build.sh" "$OUT/client"
cp "$HERE/driver.mjs" "$OUT/driver.mjs"
hilo_wrapper "$OUT/driver" env HILO_NODE_PKG="$OUT/client/package" node "$OUT/driver.mjs"
echo "node driver: built $OUT/driver" >&2
