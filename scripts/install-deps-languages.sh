#!/bin/sh
# Installs what the other-language stubs, examples and tests need (the tests
# labelled "lang"), on top of scripts/install-deps.sh, and nothing that is
# already there. Safe to run again. Uses sudo when not run as root.
#
#   Debian: protoc plugins and runtimes for Python, Go, Java and Ruby;
#           libfaketime (the conformance suite steps a driver's wall clock).
#           JUnit 5 for the Java client's tests, netty-tcnative for its TLS
#           (Debian's netty has no JDK ALPN).
#   npm:    buf, ts-proto, TypeScript, @grpc/grpc-js, into tools/node_modules
#           as tools/package-lock.json pins them (never global).
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)

# golang-github-golang-protobuf-1-5-dev: gRPC-Go also accepts the 1.3 API,
# which cannot marshal messages from today's protoc-gen-go; ask for 1.5.
# golang-github-google-uuid-dev: the Go client's benchmark compares its
# document IDs with random UUID v4 strings.
PACKAGES="
  protobuf-compiler protobuf-compiler-grpc
  python3 python3-grpcio python3-protobuf
  golang-go protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev
  golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
  golang-github-google-uuid-dev
  protobuf-compiler-grpc-java-plugin libgrpc-java libprotobuf-java
  libnetty-java libperfmark-java libgoogle-gson-java libguava-java
  libgeronimo-annotation-1.3-spec-java
  junit5 liberror-prone-java libnetty-tcnative-java libnetty-tcnative-jni
  ruby ruby-grpc ruby-google-protobuf
  libfaketime
"
# A JDK and Node.js may come from elsewhere (the machine image); only
# install Debian's when the command is missing.
command -v javac >/dev/null 2>&1 || PACKAGES="$PACKAGES default-jdk-headless"
command -v node >/dev/null 2>&1 || PACKAGES="$PACKAGES nodejs"
command -v npm >/dev/null 2>&1 || PACKAGES="$PACKAGES npm"


# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-languages $PACKAGES

# npm packages, at the versions tools/package-lock.json pins; skipped when
# tools/node_modules was installed from this very lockfile. The lockfile lists
# buf's optional per-platform packages too (npm ci needs every one listed; it
# downloads only this platform's).
stamp="$ROOT/tools/node_modules/.hilo-lock-stamp"
if [ -f "$stamp" ] && [ -x "$ROOT/tools/node_modules/.bin/buf" ] &&
   cmp -s "$stamp" "$ROOT/tools/package-lock.json"; then
  echo "install-deps-languages: tools/node_modules up to date"
else
  # npm ci installs exactly what the lockfile pins and never rewrites it.
  echo "install-deps-languages: npm ci in tools/"
  (cd "$ROOT/tools" && npm ci --no-audit --no-fund)
  cp "$ROOT/tools/package-lock.json" "$stamp"
fi
