#!/bin/sh
# Builds the Java client's conformance driver offline (javac against
# Debian's jars) and leaves OUT_DIR/driver, a wrapper that runs it.
#
#   clients/conformance/drivers/java/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is scripts/gen-stubs.sh's output. The driver speaks
# clients/conformance/PROTOCOL.md on stdin/stdout.
set -eu
HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH='' cd -- "$HERE/../../../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
GEN=$1
OUT=$(hilo_dir "$2")
# The draw example's build makes the client in OUT_DIR/client (the library's
# own build: the jar, its tests' classes and the netty-tcnative copy TLS
# needs, see clients/java/build.sh) and the draw program in OUT_DIR/draw,
# each only when its sources changed. scripts/hilo-draw java runs that
# OUT_DIR/draw, so after the conformance.java test it starts at once
# (conformance.draw_together starts every draw with its kill -9 rounds).
"$ROOT/examples/java/build-draw.sh" "$GEN" "$OUT" >&2
CP=$("$ROOT/examples/java/classpath.sh")
# Compile time only: jsr305 holds the @GuardedBy that gRPC's NameResolverRegistry
# carries (javac warns about it missing, and warnings are errors here).
hilo_javac "$OUT/classes" "$OUT/client/hilo-client.jar:$CP:/usr/share/java/jsr305.jar" "$HERE/Driver.java" all,-serial
hilo_wrapper "$OUT/driver" java -Djava.library.path="$OUT/client/native" \
  -cp "$OUT/classes:$OUT/client/hilo-client.jar:$CP:/usr/share/java/netty-tcnative.jar" Driver
echo "build.sh: $OUT/driver" >&2
