#!/bin/sh
# Builds the Java client's conformance driver offline (javac against
# Debian's jars) and leaves OUT_DIR/driver, a wrapper that runs it.
#
#   clients/conformance/drivers/java/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is scripts/gen-stubs.sh's output. The driver speaks
# clients/conformance/PROTOCOL.md on stdin/stdout.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR" >&2
  exit 2
fi
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../../../.." && pwd)
GEN=$1
mkdir -p "$2"
OUT=$(CDPATH= cd -- "$2" && pwd)
# The library's own build makes the jar (and its tests' classes) and the
# netty-tcnative copy TLS needs (see clients/java/build.sh).
"$ROOT/clients/java/build.sh" "$GEN" "$OUT/client" >&2
CP=$("$ROOT/examples/java/classpath.sh")
rm -rf "$OUT/classes"
mkdir -p "$OUT/classes"
javac --release 17 -Xlint:all,-serial -Werror -d "$OUT/classes" \
  -cp "$OUT/client/hilo-client.jar:$CP" "$HERE/Driver.java"
cat > "$OUT/driver" <<WRAPPER
#!/bin/sh
exec java -Djava.library.path="$OUT/client/native" \\
  -cp "$OUT/classes:$OUT/client/hilo-client.jar:$CP:/usr/share/java/netty-tcnative.jar" Driver "\$@"
WRAPPER
chmod +x "$OUT/driver"
echo "build.sh: $OUT/driver" >&2
