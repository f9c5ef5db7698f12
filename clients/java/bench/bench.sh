#!/bin/sh
# Runs the Java client's benchmarks (Bench.java) against a hilo_server
# started for them. Not a test: it prints figures, it asserts nothing.
#
#   clients/java/bench/bench.sh GEN_DIR OUT_DIR SERVER_BIN
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR SERVER_BIN" >&2
  exit 2
fi
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../../.." && pwd)
mkdir -p "$2"
OUT=$(CDPATH= cd -- "$2" && pwd)
"$ROOT/clients/java/build.sh" "$1" "$OUT/client" >&2
CP=$("$ROOT/examples/java/classpath.sh")
rm -rf "$OUT/bench-classes"
mkdir -p "$OUT/bench-classes"
javac --release 17 -Xlint:all -Werror -d "$OUT/bench-classes" -cp "$OUT/client/hilo-client.jar:$CP" "$HERE/Bench.java"
exec "$ROOT/testing/with_server.sh" "$3" \
  java -cp "$OUT/bench-classes:$OUT/client/hilo-client.jar:$CP" Bench @TARGET@
