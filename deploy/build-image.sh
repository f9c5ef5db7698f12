#!/bin/bash
# Builds the hilo OCI image from an already built hilo_server, on an empty
# base: nothing is pulled from any registry.
#
#   deploy/build-image.sh [--binary BUILD_DIR/service/hilo_server]
#
# stages a build context (rootfs.tar + Containerfile) and runs `buildah build`
# on it, or `docker build` with --tool docker. See deploy/README.md.
#
# Options:
#   --binary PATH      the hilo_server to package (default: what the
#                      "release" preset builds, build/release/service/
#                      hilo_server, else what the "server" preset builds,
#                      build/server/service/hilo_server)
#   --tag NAME:TAG     image name (default: hilo:VERSION, VERSION from the
#                      project() line of CMakeLists.txt; never :latest)
#   --tool buildah|docker   (default: buildah if installed, else docker)
#   --oci-archive FILE also write the image as an OCI archive, e.g. to import
#                      it into a cluster's container runtime
#   --context DIR      stage the build context here and keep it (default: a
#                      temporary folder that is removed afterwards)
#   --no-strip         keep the binary's symbols and debug information
# Environment:
#   BUILDAH_OPTS       extra global buildah options, word-split, e.g.
#                      "--root /tmp/s/root --runroot /tmp/s/run
#                       --storage-driver vfs"
#   STORAGE_DRIVER, BUILDAH_ISOLATION   read by buildah itself (vfs, chroot
#                      where overlay or runc are not available)
#   SOURCE_DATE_EPOCH  timestamp of every file in the image (default 0), so the
#                      same inputs give the same layer
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

die() { echo "build-image: $*" >&2; exit 1; }

# The binary a preset builds: release first (the test command builds it),
# then server (the quick start's).
default_binary() {
  local preset
  for preset in release server; do
    if [ -x "$repo/build/$preset/service/hilo_server" ]; then
      echo "$repo/build/$preset/service/hilo_server"
      return
    fi
  done
  die "no --binary given and neither build/release/service/hilo_server nor build/server/service/hilo_server exists; build one with 'cmake --workflow --preset server'"
}

binary=""
tag=""
tool=""
archive=""
context=""
strip_binary=1
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?}; shift 2 ;;
    --binary=*) binary=${1#*=}; shift ;;
    --tag) tag=${2:?}; shift 2 ;;
    --tag=*) tag=${1#*=}; shift ;;
    --tool) tool=${2:?}; shift 2 ;;
    --tool=*) tool=${1#*=}; shift ;;
    --oci-archive) archive=${2:?}; shift 2 ;;
    --oci-archive=*) archive=${1#*=}; shift ;;
    --context) context=${2:?}; shift 2 ;;
    --context=*) context=${1#*=}; shift ;;
    --no-strip) strip_binary=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option \"$1\" (see --help)" ;;
  esac
done

version=$(sed -n 's/^project(hilo VERSION \([0-9][0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
[ -n "$version" ] || die "cannot read the project version from $repo/CMakeLists.txt"
[ -n "$tag" ] || tag="hilo:$version"
case "${tag##*/}" in
  *:latest) die "refusing the tag \"$tag\": name an exact version" ;;
  *:*) ;;
  *) die "the tag \"$tag\" needs an explicit :VERSION" ;;
esac

if [ -z "$tool" ]; then
  if command -v buildah >/dev/null 2>&1; then tool=buildah
  elif command -v docker >/dev/null 2>&1; then tool=docker
  else die "neither buildah nor docker is installed (scripts/install-deps-deploy.sh installs buildah)"
  fi
fi
case "$tool" in buildah|docker) ;; *) die "--tool must be buildah or docker" ;; esac

[ -n "$binary" ] || binary=$(default_binary)
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
  die "no executable hilo_server at \"$binary\" (build it first, or pass --binary)"
fi
cacerts=/etc/ssl/certs/ca-certificates.crt
[ -f "$cacerts" ] || die "$cacerts is missing (Debian package ca-certificates)"

if [ -n "$context" ]; then
  mkdir -p "$context"
  context=$(cd "$context" && pwd)
  rm -rf "$context/rootfs" "$context/rootfs.tar"
else
  context=$(mktemp -d "${TMPDIR:-/tmp}/hilo-image.XXXXXX")
  trap 'rm -rf "$context"' EXIT
fi
umask 022
root="$context/rootfs"
mkdir -p "$root"

# The binary, stripped unless asked not to.
install -d "$root/usr/local/bin"
if [ "$strip_binary" = 1 ] && command -v strip >/dev/null 2>&1; then
  strip --strip-unneeded -o "$root/usr/local/bin/hilo_server" "$binary"
else
  cp "$binary" "$root/usr/local/bin/hilo_server"
fi
chmod 0755 "$root/usr/local/bin/hilo_server"

# Every shared library ldd resolves, and the dynamic loader, each at the path
# the loader will look for it (symbolic links resolved to the real file).
libs=$(ldd "$binary") || die "ldd cannot read $binary (is it a dynamic executable for this machine?)"
if printf '%s\n' "$libs" | grep -q 'not found'; then
  die "libraries of $binary are missing here: $(printf '%s\n' "$libs" | grep 'not found' | tr -s ' \t' ' ')"
fi
count=0
while read -r path; do
  [ -n "$path" ] || continue
  install -d "$root$(dirname "$path")"
  cp -L "$path" "$root$path"
  chmod 0644 "$root$path"
  count=$((count + 1))
done < <(printf '%s\n' "$libs" | awk '
  $2 == "=>" && $3 ~ /^\// { print $3; next }
  $1 ~ /^\// { print $1 }')
interp=$(readelf -l "$binary" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
if [ -z "$interp" ] || [ ! -f "$root$interp" ]; then
  die "the dynamic loader \"$interp\" of $binary was not staged"
fi
chmod 0755 "$root$interp"

# CA certificates, users, and the directories the server may write to.
install -d "$root/etc/ssl/certs"
install -m 0644 "$cacerts" "$root/etc/ssl/certs/ca-certificates.crt"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
  'hilo:x:10001:10001:hilo:/var/lib/hilo:/sbin/nologin' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'hilo:x:10001:' >"$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
install -d -m 1777 "$root/tmp"
install -d -m 0750 "$root/var/lib/hilo"
chmod 0755 "$root"

# One tar, root-owned but for the data directory, with fixed timestamps.
epoch=${SOURCE_DATE_EPOCH:-0}
tar --create --file "$context/rootfs.tar" --format=gnu --sort=name \
  --numeric-owner --owner=0 --group=0 --mtime="@$epoch" \
  --exclude=./var/lib/hilo -C "$root" .
tar --append --file "$context/rootfs.tar" --format=gnu \
  --numeric-owner --owner=10001 --group=10001 --mtime="@$epoch" \
  -C "$root" ./var/lib/hilo
rm -rf "$root"
cp "$here/Containerfile" "$context/Containerfile"
echo "build-image: staged $(basename "$binary"), $count libraries and CA certificates ($(du -k "$context/rootfs.tar" | cut -f1) KiB) in $context" >&2

if [ "$tool" = buildah ]; then
  # shellcheck disable=SC2086  # BUILDAH_OPTS is a list of options.
  buildah ${BUILDAH_OPTS:-} build --quiet --file "$context/Containerfile" \
    --build-arg "VERSION=$version" --tag "$tag" "$context" >/dev/null
  if [ -n "$archive" ]; then
    # shellcheck disable=SC2086
    buildah ${BUILDAH_OPTS:-} push --quiet "$tag" "oci-archive:$archive:$tag"
  fi
else
  docker build --quiet --file "$context/Containerfile" \
    --build-arg "VERSION=$version" --tag "$tag" "$context" >/dev/null
  if [ -n "$archive" ]; then docker save --output "$archive" "$tag"; fi
fi
echo "build-image: built $tag with $tool" >&2
echo "$tag"
