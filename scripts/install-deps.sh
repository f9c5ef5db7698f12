#!/bin/sh
# Installs what hilo needs to build and test on Debian 12, and nothing that is
# already there. Safe to run again. Uses sudo when not run as root.
set -eu

PACKAGES="
  cmake ninja-build g++ pkg-config git ca-certificates openssl clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libsqlite3-dev sqlite3 prometheus-cpp-dev
  libgtest-dev libgmock-dev
  prometheus
"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing="$missing $p"
  fi
done

if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
else
  echo "install-deps: all Debian packages present"
fi

# What the other-language examples and tests need (tests labelled "lang").
"$(dirname "$0")/install-deps-languages.sh"

# What the container image and Kubernetes tests need (tests labelled "deploy").
"$(dirname "$0")/install-deps-deploy.sh"
