#!/bin/bash
# The README's way to get hilo_server and hilo on PATH, run as written: its
# `cmake --install build/server --prefix ~/.local ...` line and the line
# after it, with build/server replaced by BUILD_DIR and HOME by a fresh
# temporary directory. Then both programs, found on PATH alone, serve and
# draw IDs, and nothing was installed outside the prefix.
#
#   path_install_test.sh SOURCE_DIR BUILD_DIR VERSION
set -euo pipefail
source_dir=$1
build_dir=$2
version=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilo-path.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "path_install_test: FAIL: $*" >&2
  exit 1
}

# The README's two lines: the install, and the check that follows it.
install_line=$(grep -m1 '^cmake --install build/server --prefix ~/.local' \
  "$source_dir/README.md") || fail "README.md shows no 'cmake --install build/server --prefix ~/.local' line"
check_line=$(grep -A1 -m1 '^cmake --install build/server' "$source_dir/README.md" |
  tail -n1)
case "$check_line" in
  *hilo_server*) ;;
  *) fail "README.md's install line is not followed by a line running hilo_server" ;;
esac
expected=$(printf 'hilo_server %s\nhilo %s' "$version" "$version")

mkdir "$tmp/home"
script=$(printf '%s\n%s\n' "$install_line" "$check_line" |
  sed "s#build/server#$build_dir#g")
printed=$(cd "$tmp" && HOME="$tmp/home" PATH=/usr/bin:/bin timeout 120 \
  sh -c "$script" 2>&1) || fail "the README's lines failed:
$printed"
# The install's log, then the two versions.
[ "$(printf '%s\n' "$printed" | tail -n2)" = "$expected" ] ||
  fail "printed:
$printed
expected it to end with:
$expected"
if outside=$(printf '%s\n' "$printed" |
  sed -n 's/^-- \(Installing\|Up-to-date\): //p' | grep -vF "$tmp/home/.local/"); then
  fail "installed outside ~/.local: $outside"
fi

# hilo_server and hilo from PATH alone: a server, and IDs from it.
export HOME="$tmp/home" PATH="$tmp/home/.local/bin:/usr/bin:/bin"
server=$(command -v hilo_server)
[ "$server" = "$tmp/home/.local/bin/hilo_server" ] || fail "hilo_server on PATH is $server"
"$source_dir/testing/with_server.sh" "$server" \
  sh -c 'hilo --target="$0" next path -n 2 >"$1"' @TARGET@ "$tmp/ids" ||
  fail "hilo next against hilo_server"
ids=$(cat "$tmp/ids")
[ "$ids" = "path/1-A
path/2-A" ] || fail "hilo next printed: $ids"
echo "path_install_test: README's install put hilo_server and hilo on PATH; they drew $ids" | tr '\n' ' '
echo
