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
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR" >&2
  exit 2
fi
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../.." && pwd)
GEN=$1
mkdir -p "$2"
OUT=$(CDPATH= cd -- "$2" && pwd)
[ -d "$GEN/java/io/hilo/v1" ] || { echo "build-draw.sh: no Java stubs in $GEN/java; run scripts/gen-stubs.sh" >&2; exit 1; }
CP=$("$HERE/classpath.sh")

exec 9>"$OUT/.draw.lock"
if ! flock -w 300 9; then
  echo "build-draw.sh: $OUT/.draw.lock is still held after 300 s (another build into $OUT)" >&2
  exit 1
fi
sums=$(find "$ROOT/clients/java/src" "$GEN/java/io/hilo/v1" -type f -name '*.java' | LC_ALL=C sort |
         xargs sha256sum | cut -d ' ' -f 1
       sha256sum "$HERE/Draw.java" "$HERE/classpath.sh" "$0" "$ROOT/clients/java/build.sh" | cut -d ' ' -f 1
       echo "$CP")
if [ -x "$OUT/draw" ] && [ -f "$OUT/client/hilo-client.jar" ] &&
   [ "$sums" = "$(cat "$OUT/.draw.sums" 2>/dev/null)" ]; then
  echo "build-draw.sh: $OUT/draw is up to date" >&2
  exit 0
fi
rm -f "$OUT/.draw.sums" "$OUT/draw"
"$ROOT/clients/java/build.sh" "$GEN" "$OUT/client" >&2
rm -rf "$OUT/draw-classes"
mkdir -p "$OUT/draw-classes"
javac --release 17 -Xlint:all -Werror -d "$OUT/draw-classes" -cp "$OUT/client/hilo-client.jar:$CP" "$HERE/Draw.java"
cat > "$OUT/draw" <<WRAPPER
#!/bin/sh
exec java -cp "$OUT/draw-classes:$OUT/client/hilo-client.jar:$CP" Draw "\$@"
WRAPPER
chmod +x "$OUT/draw"
printf '%s\n' "$sums" >"$OUT/.draw.sums"
echo "build-draw.sh: $OUT/draw" >&2
