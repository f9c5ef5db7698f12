#!/bin/sh
# Installs the hilo Java client into your local Maven repository, as
# io.hilo:hilo-client (the version in clients/java/pom.xml), so that a Maven
# project of yours can depend on it:
#
#   clients/java/mvn-install.sh [MAVEN_ARGUMENT...]
#
# Builds hilo-client.jar offline with build.sh (the io.hilo.v1 stubs
# generated from proto/hilo/v1/hilo.proto, then javac against Debian's jars)
# in a temporary directory, then runs `mvn install:install-file` with
# pom.xml as the artifact's POM, which names its gRPC and protobuf
# dependencies. MAVEN_ARGUMENTs go to mvn (-o, -s settings.xml,
# -Dmaven.repo.local=...). Needs scripts/install-deps-languages.sh java.
set -eu
HERE=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
ROOT=$(CDPATH= cd -- "$HERE/../.." && pwd)
command -v mvn >/dev/null 2>&1 ||
  { echo "mvn-install: mvn not found (on Debian: scripts/install-deps-languages.sh java)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilo-java.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$ROOT/scripts/gen-stubs.sh" "$tmp/gen" java >/dev/null
"$HERE/build.sh" "$tmp/gen" "$tmp/out" >/dev/null
# Maven prints its errors on stdout; Debian's 3.8 also a colour reset at
# exit, even in batch mode: only a failure's output is shown.
if ! out=$(mvn -B -q "$@" install:install-file \
  -Dfile="$tmp/out/hilo-client.jar" -DpomFile="$HERE/pom.xml" 2>&1); then
  printf '%s\n' "$out" >&2
  echo "mvn-install: mvn install:install-file failed" >&2
  exit 1
fi
version=$(sed -n 's|^  <version>\(.*\)</version>|\1|p' "$HERE/pom.xml" | head -n1)
echo "mvn-install: io.hilo:hilo-client:$version is in your local Maven repository"
