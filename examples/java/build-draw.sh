#!/bin/sh
# Builds examples/java/Draw.java against the Java client and leaves
# OUT_DIR/draw, a wrapper that runs it (scripts/hilo-draw java):
#
#   examples/java/build-draw.sh GEN_DIR OUT_DIR
#   OUT_DIR/draw --targets=HOST:PORT[,...] --collection=NAME --threads=N --seconds=S
#
# GEN_DIR is scripts/gen-stubs.sh's output.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR" >&2
  exit 2
fi
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../.." && pwd)
mkdir -p "$2"
OUT=$(CDPATH= cd -- "$2" && pwd)
"$ROOT/clients/java/build.sh" "$1" "$OUT/client" >&2
CP=$("$HERE/classpath.sh")
rm -rf "$OUT/classes"
mkdir -p "$OUT/classes"
javac --release 17 -Xlint:all -Werror -d "$OUT/classes" -cp "$OUT/client/hilo-client.jar:$CP" "$HERE/Draw.java"
cat > "$OUT/draw" <<WRAPPER
#!/bin/sh
exec java -cp "$OUT/classes:$OUT/client/hilo-client.jar:$CP" Draw "\$@"
WRAPPER
chmod +x "$OUT/draw"
echo "build-draw.sh: $OUT/draw" >&2
