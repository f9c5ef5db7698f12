#!/bin/bash
# Installs hilo from a build directory into a fresh temporary prefix, builds
# examples/cpp-consumer against that prefix alone, and runs it against the
# installed hilo_server (port 0, a fresh database).
#
#   consumer_test.sh cmake|pkg-config BUILD_DIR SOURCE_DIR VERSION
#
# cmake:      find_package(hilo) with CMAKE_PREFIX_PATH=PREFIX only.
# pkg-config: one c++ command with `pkg-config --cflags --libs hilo-client`.
# Either way the program must print exactly the IDs a fresh server gives.
# CXX and CXX_LAUNCHER (e.g. ccache), when set, pick the compiler.
set -euo pipefail

mode=$1
build_dir=$2
source_dir=$3
version=$4

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilo-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() {
  echo "consumer_test: FAIL: $*" >&2
  exit 1
}

cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log"
# Everything lands in the prefix (the unit and /etc/default are the .debs').
if outside=$(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$tmp/install.log" |
  grep -vF "$prefix/"); then
  fail "installed outside the prefix: $outside"
fi
# The prefix must stand alone: no installed text file may name the source or
# the build tree.
if leaks=$(grep -rlIF -e "$source_dir" -e "$build_dir" "$prefix"); then
  fail "installed files point back into the tree: $leaks"
fi
for program in hilo_server hilo; do
  printed=$("$prefix/bin/$program" --version) ||
    fail "$program --version exited non-zero"
  [ "$printed" = "$program $version" ] ||
    fail "$program --version printed '$printed'"
done

# The consumer's sources, copied out of the tree.
cp -r "$source_dir/examples/cpp-consumer" "$tmp/consumer"
case "$mode" in
  cmake)
    # examples/cpp-consumer/CMakeLists.txt's instructions, as written, in
    # the copy: its two cmake lines (the prefix for /where/hilo/is/installed;
    # CXX and CMAKE_CXX_COMPILER_LAUNCHER from the environment), then its
    # program line, below.
    mapfile -t lines < <(sed -n 's/^#   \(cmake .*\)$/\1/p' \
      "$tmp/consumer/CMakeLists.txt")
    [ "${#lines[@]}" -eq 2 ] ||
      fail "examples/cpp-consumer/CMakeLists.txt shows ${#lines[@]} cmake lines, not 2"
    [ -n "${CXX_LAUNCHER:-}" ] && export CMAKE_CXX_COMPILER_LAUNCHER="$CXX_LAUNCHER"
    for line in "${lines[@]}"; do
      line=${line//\/where\/hilo\/is\/installed/$prefix}
      (cd "$tmp/consumer" && eval "$line") >>"$tmp/configure.log" 2>&1 ||
        { cat "$tmp/configure.log"; fail "$line"; }
    done
    grep -qxF -- "-- draw_ids: hilo $version from $prefix/lib/cmake/hilo" \
      "$tmp/configure.log" ||
      { cat "$tmp/configure.log"; fail "find_package(hilo) did not find $version in $prefix"; }
    run_line=$(sed -n 's/^#   \(build\/draw_ids .*\)$/\1/p' "$tmp/consumer/CMakeLists.txt")
    [ "$run_line" = "build/draw_ids 127.0.0.1:50051" ] ||
      fail "examples/cpp-consumer/CMakeLists.txt runs '$run_line'"
    program=$tmp/consumer/build/draw_ids
    ;;
  pkg-config)
    pc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
      pkg-config --cflags --libs hilo-client)
    pc_version=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
      pkg-config --modversion hilo-client)
    [ "$pc_version" = "$version" ] || fail "hilo-client.pc says $pc_version"
    program=$tmp/draw_ids
    # shellcheck disable=SC2086  # pkg-config's flags, split into words
    ${CXX_LAUNCHER:-} "${CXX:-c++}" -std=c++20 -O1 \
      -o "$program" "$tmp/consumer/draw_ids.cc" $pc_flags ||
      fail "c++ draw_ids.cc \$(pkg-config --cflags --libs hilo-client)"
    ;;
  *)
    echo "usage: $0 cmake|pkg-config BUILD_DIR SOURCE_DIR VERSION" >&2
    exit 2
    ;;
esac

"$source_dir/testing/with_server.sh" "$prefix/bin/hilo_server" \
  /bin/sh -c '"$0" "$1" >"$2"' "$program" @TARGET@ "$tmp/ids.txt" ||
  fail "draw_ids against the installed hilo_server"
expected='invoices/1-A
invoices/2-A
invoices/3-A
number 4 from node A'
[ "$(cat "$tmp/ids.txt")" = "$expected" ] ||
  fail "draw_ids printed:
$(cat "$tmp/ids.txt")
expected:
$expected"
echo "consumer_test: $mode consumer built against $prefix alone drew:"
cat "$tmp/ids.txt"
