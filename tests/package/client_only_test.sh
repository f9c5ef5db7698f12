#!/bin/bash
# The client and the hilo CLI configure and build with -DHILO_BUILD_SERVER=OFF
# while CMake may find nothing but gRPC (with what its own config finds),
# Protobuf, Abseil and Threads: SQLite, prometheus-cpp, GoogleTest and Google
# Benchmark are disabled, so a find_package of any of them would fail the
# configure, and libpq (a pkg-config module) must not have been looked for.
#
#   client_only_test.sh SOURCE_DIR WORK_DIR VERSION
#
# CXX_LAUNCHER (e.g. ccache), when set, is the compiler launcher.
set -euo pipefail

source_dir=$1
work=$2
version=$3
rm -rf "$work"
trap 'rm -rf "$work"' EXIT

cmake -S "$source_dir" -B "$work" -G Ninja -DHILO_BUILD_SERVER=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON \
  ${CXX_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER="$CXX_LAUNCHER"} \
  >"$work.configure.log" 2>&1 ||
  { cat "$work.configure.log"; rm -f "$work.configure.log"; exit 1; }
rm -f "$work.configure.log"
if grep -q '^LIBPQ_' "$work/CMakeCache.txt"; then
  echo "client_only_test: the client-only configure looked for libpq" >&2
  exit 1
fi
cmake --build "$work" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; exit 1; }
for built in client_cpp/libhilo_client.a proto/libhilo_proto.a cli/hilo; do
  [ -f "$work/$built" ] || { echo "client_only_test: no $built" >&2; exit 1; }
done
printed=$("$work/cli/hilo" --version)
[ "$printed" = "hilo $version" ] ||
  { echo "client_only_test: hilo --version printed '$printed'" >&2; exit 1; }
echo "client_only_test: the client and hilo $version built with gRPC, Protobuf and Abseil only"
