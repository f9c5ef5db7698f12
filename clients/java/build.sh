#!/bin/sh
# Builds the Java client offline with javac against Debian's jars, and
# optionally runs its JUnit 5 tests.
#
#   clients/java/build.sh GEN_DIR OUT_DIR [test SERVER_BIN]
#
# GEN_DIR is scripts/gen-stubs.sh's output (GEN_DIR/java/io/hilo/v1/*.java).
# OUT_DIR receives hilo-client.jar (the library with its generated stubs,
# io.hilo.client and io.hilo.v1) and the compiled tests. With "test
# SERVER_BIN" the tests run on JUnit's console launcher, starting
# SERVER_BIN (hilo_server) processes where they need a real server.
# Needs scripts/install-deps-languages.sh (JDK 17, libgrpc-java, junit5).
set -eu
if [ $# -ne 2 ] && [ $# -ne 4 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR [test SERVER_BIN]" >&2
  exit 2
fi
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../.." && pwd)
GEN=$1
OUT=$2
CP=$("$ROOT/examples/java/classpath.sh")
# Compile time only: the annotations gRPC's classes carry (javac warns
# about them missing, and warnings are errors here).
ANN=/usr/share/java/error_prone_annotations.jar
JUNIT=/usr/share/java/junit-platform-console-standalone.jar
[ -f "$JUNIT" ] || { echo "build.sh: $JUNIT missing; run scripts/install-deps-languages.sh" >&2; exit 1; }
[ -d "$GEN/java/io/hilo/v1" ] || { echo "build.sh: no Java stubs in $GEN/java; run scripts/gen-stubs.sh" >&2; exit 1; }

mkdir -p "$OUT"
rm -rf "$OUT/classes" "$OUT/test-classes"
mkdir -p "$OUT/classes" "$OUT/test-classes"
# Generated code: no lint. Ours: every lint but the serial and processing
# noise, warnings are errors.
javac -nowarn -Xlint:none --release 17 -d "$OUT/classes" -cp "$CP" "$GEN"/java/io/hilo/v1/*.java
javac --release 17 -Xlint:all,-serial,-processing -Werror -d "$OUT/classes" -cp "$OUT/classes:$CP:$ANN" \
  $(find "$HERE/src/main/java" -name '*.java' | sort)
jar --create --file "$OUT/hilo-client.jar" -C "$OUT/classes" .
javac --release 17 -Xlint:all,-serial,-processing,-try -Werror -d "$OUT/test-classes" \
  -cp "$OUT/hilo-client.jar:$CP:$JUNIT:$ANN" $(find "$HERE/src/test/java" -name '*.java' | sort)
# TLS: Debian's netty 4.1.48 lacks the JDK ALPN negotiator, so gRPC needs
# OpenSSL through netty-tcnative, whose loader looks for
# libnetty_tcnative.so and refuses Debian's libnetty-tcnative.so by its
# name: a copy under the expected name goes in OUT_DIR/native, for
# -Djava.library.path.
TCN_SO=/usr/lib/x86_64-linux-gnu/jni/libnetty-tcnative.so
mkdir -p "$OUT/native"
if [ -f "$TCN_SO" ]; then cp "$TCN_SO" "$OUT/native/libnetty_tcnative.so"; fi
echo "build.sh: $OUT/hilo-client.jar"

if [ $# -eq 4 ]; then
  [ "$3" = test ] || { echo "usage: $0 GEN_DIR OUT_DIR [test SERVER_BIN]" >&2; exit 2; }
  # The consumer test compiles a program against the jar alone (plus
  # Debian's gRPC jars), as a user outside this tree would; the draw test
  # compiles examples/java/Draw.java the same way.
  exec env HILO_SERVER_BIN="$4" HILO_CLIENT_JAR="$OUT/hilo-client.jar" HILO_GRPC_CP="$CP" \
    HILO_CONSUMER_SRC="$HERE/src/test/consumer" HILO_DRAW_SRC="$ROOT/examples/java" \
    java -Djava.library.path="$OUT/native" \
    -cp "$OUT/test-classes:$OUT/hilo-client.jar:$CP:/usr/share/java/netty-tcnative.jar:$JUNIT" \
    org.junit.platform.console.ConsoleLauncher --disable-banner --disable-ansi-colors --details=tree \
    --fail-if-no-tests --select-package=io.hilo.client
fi
