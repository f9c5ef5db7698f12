#!/bin/sh
# Installs what building and running hilo_server needs on Debian 12 (the
# README's first five minutes: cmake --workflow --preset server, and curl to
# scrape the metrics), and nothing that is already there. Safe to run again. Uses sudo when not run as root.
# The client alone (-DHILO_BUILD_SERVER=OFF) needs only the first two lines'
# build tools and gRPC, Protobuf and Abseil.
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

PACKAGES="
  cmake ninja-build g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libssl-dev
  libsqlite3-dev prometheus-cpp-dev libpq-dev
  curl
"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-server $PACKAGES
