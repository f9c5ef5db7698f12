#!/bin/sh
# Builds the hilo-client npm package into OUT_DIR (never into the tree):
#   OUT_DIR/package/            the package: package.json, README.md,
#                               node_modules/ (runtime dependencies, bundled),
#                               dist/esm (ES module) and dist/cjs (CommonJS),
#                               each with its .d.ts type declarations
#   OUT_DIR/hilo-client-VERSION.tgz   what `npm pack` makes of it
#   OUT_DIR/examples/draw.js    examples/node/draw.ts, for scripts/hilo-draw
#
#   clients/node/build.sh OUT_DIR
#
# Dependencies come from clients/node/node_modules, installed by npm ci from
# package-lock.json (scripts/install.sh). The service description is read
# from proto/hilo/v1/hilo.proto and embedded (scripts/descriptor.cjs).
#
# It builds only when OUT_DIR was built from other sources: the checksums of
# everything it reads are kept in OUT_DIR/.built.sums, so a second call
# (scripts/hilo-draw node, the conformance driver, the tests) costs a
# checksum instead of three compilations. Several callers at once take
# turns on OUT_DIR/.lock (at most 300 s), so none sees a half-built tree.
set -eu
DIR=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH='' cd -- "$DIR/../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 1 OUT_DIR "$@"
OUT=$(hilo_dir "$1")

"$DIR/scripts/install.sh"
hilo_take_turns "$OUT/.lock" clients/node
sums=$(sha256sum "${HILO_NODE_SRC:-$DIR/src}"/*.ts "$ROOT/proto/hilo/v1/hilo.proto" \
         "$ROOT/examples/node/draw.ts" "$DIR/package.json" "$DIR/package-lock.json" \
         "$DIR/README.md" "$DIR/scripts/descriptor.cjs" "$0" | cut -d ' ' -f 1)
if [ -f "$OUT/examples/draw.js" ] && hilo_up_to_date "$OUT/.built.sums" "$sums"; then
  echo "clients/node: $OUT is up to date" >&2
  exit 0
fi
rm -f "$OUT/.built.sums"
rm -rf "$OUT/src" "$OUT/package" "$OUT"/hilo-client-*.tgz
mkdir -p "$OUT/src" "$OUT/package"
# HILO_NODE_SRC: another copy of src/ (scripts/mutants.mjs builds mutated ones).
cp "${HILO_NODE_SRC:-$DIR/src}"/*.ts "$OUT/src/"
node "$DIR/scripts/descriptor.cjs" "$ROOT/proto/hilo/v1/hilo.proto" "$OUT/src/descriptor.ts"
# tsc (and node, for tests run from here) resolve packages by walking up.
ln -sfn "$DIR/node_modules" "$OUT/node_modules"

TSC="$DIR/node_modules/.bin/tsc"
COMMON="--strict --target ES2022 --lib ES2022,ESNext.Disposable --declaration
  --types node --typeRoots $OUT/node_modules/@types --rootDir $OUT/src
  --esModuleInterop --skipLibCheck false --noEmitOnError"
# shellcheck disable=SC2086
"$TSC" $COMMON --module commonjs --moduleResolution node10 \
  --outDir "$OUT/package/dist/cjs" "$OUT"/src/*.ts
# shellcheck disable=SC2086
"$TSC" $COMMON --module es2022 --moduleResolution bundler \
  --outDir "$OUT/package/dist/esm" "$OUT"/src/*.ts
echo '{"type": "commonjs"}' > "$OUT/package/dist/cjs/package.json"
echo '{"type": "module"}' > "$OUT/package/dist/esm/package.json"
cp "$DIR/package.json" "$DIR/README.md" "$OUT/package/"
# The runtime dependencies travel inside the tarball (bundleDependencies),
# exactly as package-lock.json pins them: an install needs no registry, and
# gets the tree the package was tested with, not whatever a transitive range
# (protobufjs wants any @types/node) allows today. Installed here from the
# cache npm ci just filled.
cp "$DIR/package-lock.json" "$OUT/package/"
(cd "$OUT/package" && npm ci --offline --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null)
rm "$OUT/package/package-lock.json"
# examples/node/draw.ts (for scripts/hilo-draw), compiled against the package
# as a user would import it: OUT_DIR/examples/draw.js.
rm -rf "$OUT/examples"
mkdir -p "$OUT/examples/node_modules"
ln -sfn "$OUT/package" "$OUT/examples/node_modules/hilo-client"
echo '{"type": "module"}' > "$OUT/examples/package.json"
cp "$ROOT/examples/node/draw.ts" "$OUT/examples/"
"$TSC" --strict --target ES2022 --module nodenext --moduleResolution nodenext \
  --types node --typeRoots "$DIR/node_modules/@types" --skipLibCheck \
  "$OUT/examples/draw.ts"
(cd "$OUT/package" && npm pack --silent --pack-destination "$OUT" >/dev/null)
ls "$OUT"/hilo-client-*.tgz >/dev/null
printf '%s\n' "$sums" >"$OUT/.built.sums"
echo "clients/node: built $OUT/package and $(basename "$OUT"/hilo-client-*.tgz)" >&2
