#!/bin/sh
# Builds examples/java/Draw.java against the Java client and leaves
# OUT_DIR/draw, a wrapper that runs it (scripts/hilo-draw java):
#
#   examples/java/build-draw.sh GEN_DIR OUT_DIR
#   OUT_DIR/draw --targets=HOST:PORT[,...] --collection=NAME --threads=N --seconds=S
#
# GEN_DIR is scripts/gen-stubs.sh's output. The client goes to
# OUT_DIR/client (clients/java/build.sh), the program's classes to
# OUT_DIR/draw-classes, so the conformance driver's build can share OUT_DIR
# (it keeps its own classes in OUT_DIR/classes).
#
# It builds only when OUT_DIR was built from other sources: the checksums of
# everything it reads are kept in OUT_DIR/.draw.sums, so a second call
# (scripts/hilo-draw java, once per collection at the same time) costs a
# checksum instead of a javac run. Callers at once take turns on
# OUT_DIR/.draw.lock (at most 300 s), so none runs a half-built program.
set -eu
HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH='' cd -- "$HERE/../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
GEN=$1
OUT=$(hilo_dir "$2")
[ -d "$GEN/java/io/hilo/v1" ] || { echo "build-draw.sh: no Java stubs in $GEN/java; run scripts/gen-stubs.sh" >&2; exit 1; }
CP=$("$HERE/classpath.sh")

hilo_take_turns "$OUT/.draw.lock" build-draw.sh
sums=$(find "$ROOT/clients/java/src" "$GEN/java/io/hilo/v1" -type f -name '*.java' | LC_ALL=C sort |
         xargs sha256sum | cut -d ' ' -f 1
       sha256sum "$HERE/Draw.java" "$HERE/classpath.sh" "$0" "$ROOT/clients/java/build.sh" \
         "$ROOT/scripts/build_lib.sh" | cut -d ' ' -f 1
       echo "$CP")
if [ -x "$OUT/draw" ] && [ -f "$OUT/client/hilo-client.jar" ] &&
   hilo_up_to_date "$OUT/.draw.sums" "$sums"; then
  echo "build-draw.sh: $OUT/draw is up to date" >&2
  exit 0
fi
rm -f "$OUT/.draw.sums" "$OUT/draw"
"$ROOT/clients/java/build.sh" "$GEN" "$OUT/client" >&2
hilo_javac "$OUT/draw-classes" "$OUT/client/hilo-client.jar:$CP" "$HERE/Draw.java" all
hilo_wrapper "$OUT/draw" java -cp "$OUT/draw-classes:$OUT/client/hilo-client.jar:$CP" Draw
printf '%s\n' "$sums" >"$OUT/.draw.sums"
echo "build-draw.sh: $OUT/draw" >&2
