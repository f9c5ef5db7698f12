#!/bin/sh
# Installs what the other-language clients, stubs, examples and tests need,
# and nothing that is already there. Safe to run again. Uses sudo when not
# run as root.
#
#   scripts/install-deps-languages.sh [LANGUAGE...]
#
# LANGUAGE is any of python go java node ruby. Each installs what using
# that language's client (or its example, for Ruby) needs and what generating
# its stubs needs:
#
#   python: protoc, grpc_python_plugin, Debian's python3-grpcio and
#           python3-protobuf, python3-venv and python3-setuptools (to build
#           and install the client's wheel offline).
#   go:     Go 1.19, protoc-gen-go(-grpc) and Debian's gRPC-Go and protobuf
#           packages (the client builds offline against /usr/share/gocode).
#   java:   a JDK, the grpc-java protoc plugin and Debian's gRPC and protobuf
#           jars, Maven and the Maven plugins that install the client into a
#           local repository and build a project that depends on it, offline
#           against /usr/share/maven-repo; JUnit 5 and netty-tcnative for the
#           client's tests.
#   node:   Node.js and npm, and the npm tools below (ts-proto makes the
#           TypeScript stubs).
#   ruby:   Ruby with Debian's gRPC and protobuf gems.
#
# No LANGUAGE: every one of them, plus what the tests labelled "lang" need
# beyond them: libfaketime (the conformance suite steps a driver's wall
# clock) and, with node, buf (lang.buf). npm packages go into
# tools/node_modules as tools/package-lock.json pins them (never global).
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)

if [ $# -eq 0 ]; then
  set -- python go java node ruby
  ALL=1
else
  ALL=0
fi

PACKAGES="protobuf-compiler"
NODE=0
for lang in "$@"; do
  case "$lang" in
    python)
      PACKAGES="$PACKAGES protobuf-compiler-grpc python3 python3-grpcio
        python3-protobuf python3-venv python3-setuptools python3-wheel"
      ;;
    go)
      # golang-github-golang-protobuf-1-5-dev: gRPC-Go also accepts the 1.3
      # API, which cannot marshal messages from today's protoc-gen-go; ask
      # for 1.5. golang-github-google-uuid-dev: the Go client's benchmark
      # compares its document IDs with random UUID v4 strings.
      PACKAGES="$PACKAGES golang-go protoc-gen-go protoc-gen-go-grpc
        golang-google-grpc-dev golang-google-protobuf-dev
        golang-github-golang-protobuf-1-5-dev golang-github-google-uuid-dev"
      ;;
    java)
      # JUnit 5 for the client's tests, netty-tcnative for its TLS
      # (Debian's netty has no JDK ALPN). Maven and its plugins: mvn install
      # of the client and a project that uses it, offline.
      PACKAGES="$PACKAGES protobuf-compiler-grpc-java-plugin libgrpc-java
        libprotobuf-java libnetty-java libperfmark-java libgoogle-gson-java
        libguava-java libgeronimo-annotation-1.3-spec-java
        junit5 liberror-prone-java libnetty-tcnative-java
        libnetty-tcnative-jni
        maven libmaven-install-plugin-java libmaven-compiler-plugin-java
        libmaven-jar-plugin-java libmaven-resources-plugin-java
        libsurefire-java libmaven-dependency-plugin-java"
      # A JDK may come from elsewhere (the machine image); only install
      # Debian's when the command is missing.
      command -v javac >/dev/null 2>&1 ||
        PACKAGES="$PACKAGES default-jdk-headless"
      ;;
    node)
      NODE=1
      command -v node >/dev/null 2>&1 || PACKAGES="$PACKAGES nodejs"
      command -v npm >/dev/null 2>&1 || PACKAGES="$PACKAGES npm"
      ;;
    ruby)
      PACKAGES="$PACKAGES protobuf-compiler-grpc ruby ruby-grpc
        ruby-google-protobuf"
      ;;
    *)
      echo "install-deps-languages: unknown language '$lang'; give any of: python go java node ruby" >&2
      exit 2
      ;;
  esac
done
[ "$ALL" -eq 1 ] && PACKAGES="$PACKAGES libfaketime"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-languages $PACKAGES

[ "$NODE" -eq 1 ] || exit 0
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
