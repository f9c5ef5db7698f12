#!/bin/sh
# Prints the classpath for the generated Java stubs and examples/java: the
# Debian jars of grpc-java (netty transport), protobuf-java and what they
# need at run time. Fails naming any jar that is missing.
set -eu
JARS="grpc-api grpc-context grpc-core grpc-netty grpc-protobuf
  grpc-protobuf-lite grpc-stub protobuf guava perfmark-api gson
  geronimo-annotation-1.3-spec netty-buffer netty-codec netty-codec-http
  netty-codec-http2 netty-codec-socks netty-common netty-handler
  netty-handler-proxy netty-resolver netty-transport
  netty-transport-native-unix-common"
cp=""
for j in $JARS; do
  f=/usr/share/java/$j.jar
  if [ ! -f "$f" ]; then
    echo "classpath.sh: $f missing; run scripts/install-deps-languages.sh" >&2
    exit 1
  fi
  cp="${cp:+$cp:}$f"
done
echo "$cp"
