#!/bin/sh
# Compiles examples/node/hilo_example.ts together with the generated
# TypeScript stubs into plain JavaScript.
#
#   examples/node/build.sh GEN_NODE_DIR OUT_DIR
#
# GEN_NODE_DIR is the node/ directory of scripts/gen-stubs.sh's output
# (build/gen/node by default). Afterwards run
#   node OUT_DIR/js/hilo_example.js HOST:PORT
# The TypeScript compiler, @grpc/grpc-js and @bufbuild/protobuf come from
# tools/node_modules (scripts/install-deps-languages.sh).
set -eu
ROOT=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_NODE_DIR OUT_DIR" >&2
  exit 2
fi
GEN=$1
OUT=$2
if [ ! -f "$GEN/hilo/v1/hilo.ts" ]; then
  echo "build.sh: $GEN/hilo/v1/hilo.ts missing; run scripts/gen-stubs.sh" >&2
  exit 1
fi
rm -rf "$OUT/src" "$OUT/js"
mkdir -p "$OUT/src"
cp -R "$GEN" "$OUT/src/gen"
cp "$ROOT/examples/node/hilo_example.ts" "$OUT/src/"
# Module resolution (tsc now, node later) walks up from OUT to this link.
ln -sfn "$ROOT/tools/node_modules" "$OUT/node_modules"
"$ROOT/tools/node_modules/.bin/tsc" --strict --target ES2020 \
  --module commonjs --moduleResolution node --esModuleInterop \
  --types node --typeRoots "$OUT/node_modules/@types" --rootDir "$OUT/src" --outDir "$OUT/js" \
  "$OUT/src/hilo_example.ts"
echo "build.sh: built $OUT/js/hilo_example.js"
