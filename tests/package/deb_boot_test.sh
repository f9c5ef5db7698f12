#!/bin/bash
# hilo-server's systemd unit, run for real: a minimal Debian 12 root made
# with debootstrap, the previous hilo-server installed into it with apt (its
# dependencies from the Debian mirror), booted with systemd-nspawn, and
# boot_check.sh run inside as a oneshot unit: hilo.service enabled and
# started, IDs drawn through it, the database files private, the exposure
# that systemd-analyze security rates at most EXPOSURE_BOUND, a clean stop;
# then hilo-server upgraded to the new .deb while running, restarted, and the
# next IDs continuing after the last ones drawn.
#
#   deb_boot_test.sh BUILD_DIR DEBS_DIR WORK_DIR VERSION
#
# "Previous" is this tree's hilo-server again, made by cpack with the version
# VERSION~prev1 (sorts before VERSION): no earlier release has been
# published. DEBS_DIR holds the new one (package.deb_build). Only hilo-server
# is installed: libhilo-client-dev has no unit and would pull in a compiler's
# worth of -dev packages.
#
# Exit 77 (ctest: skipped) with the reason when this machine cannot run it:
# not root, no systemd-nspawn or debootstrap, or the mirror is unreachable.
# Every step is bounded; the container and the root are removed whatever
# happens, by the EXIT trap and, should the test be killed, by a watchdog
# that outlives it.
set -euo pipefail

build_dir=$1 debs_dir=$2 work=$3 version=$4
mirror=${HILO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
exposure_bound=2.0
boot_seconds=120
here=$(cd "$(dirname "$0")" && pwd)
old_version=${version}~prev1-1
new_version=${version}-1
root=$work/root

log() { echo "deb_boot_test: $*"; }
fail() {
  echo "deb_boot_test: FAIL: $*" >&2
  exit 1
}
skip() {
  echo "deb_boot_test: SKIP: $*"
  exit 77
}

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap and systemd-nspawn)"
for tool in systemd-nspawn debootstrap unshare curl; do
  command -v "$tool" >/dev/null ||
    skip "no $tool (scripts/install-deps-package.sh installs it)"
done
curl -sfI --max-time 15 "$mirror/dists/$suite/Release" >/dev/null ||
  skip "the Debian mirror $mirror is unreachable"
arch=$(dpkg --print-architecture)
new_deb=$debs_dir/hilo-server_${new_version}_$arch.deb
[ -f "$new_deb" ] || fail "no $new_deb (package.deb_build makes it)"

# Whatever mounts and processes the root has: each runs in a mount namespace
# of its own (unshare -m, systemd-nspawn), so none reaches this one. This
# removes what is left of a run, this one's or a killed one's.
remove_root() {
  local mounts
  mounts=$(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' \
    /proc/self/mounts | sort -r)
  for m in $mounts; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$work"
}

container_pid=""
cleanup() {
  if [ -n "$container_pid" ] && kill -0 "$container_pid" 2>/dev/null; then
    kill -KILL "$container_pid" 2>/dev/null || true
    wait "$container_pid" 2>/dev/null || true
  fi
  remove_root
}
remove_root
mkdir -p "$work"
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
# The watchdog: a process of its own session and no child of this one (ctest
# kills a test's process tree), that removes the root once this script is
# gone. Each containerised step runs in a PID namespace whose init is killed
# with its parent (unshare --kill-child), so nothing of the container
# outlives this script either.
# shellcheck disable=SC2016  # expanded by the watchdog's shell
(setsid bash -c "$(declare -f remove_root)"'
  root=$2 work=$3
  while kill -0 "$1" 2>/dev/null; do sleep 2; done
  remove_root' watchdog $$ "$root" "$work" </dev/null >/dev/null 2>&1 &)

start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }

# A command in a PID and mount namespace of its own, whose init dies with
# unshare (--kill-child), which dies with this script (setpriv --pdeathsig;
# run as a simple command, so that this script is its parent): a killed test
# leaves no process and no mount behind.
contained=(setpriv --pdeathsig KILL unshare --pid --fork --kill-child --mount
  --propagation private --mount-proc)

# The previous .deb, made while debootstrap downloads.
log "debootstrap --variant=minbase $suite from $mirror"
"${contained[@]}" timeout 200 debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus "$suite" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 &
debootstrap_pid=$!
container_pid=$debootstrap_pid
nice cpack --config "$build_dir/CPackConfig.cmake" -B "$work/old" \
  -D "CPACK_PACKAGE_VERSION=${version}~prev1" -D CPACK_COMPONENTS_ALL=server \
  >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack of $old_version"; }
old_deb=$work/old/hilo-server_${old_version}_$arch.deb
[ -f "$old_deb" ] || fail "cpack made no $old_deb: $(ls "$work/old")"
[ "$(dpkg-deb -f "$old_deb" Version)" = "$old_version" ] || fail "$old_deb: Version"
dpkg --compare-versions "$old_version" lt "$new_version" ||
  fail "$old_version does not sort before $new_version"
wait "$debootstrap_pid" ||
  { tail -20 "$work/debootstrap.log"; fail "debootstrap (log above)"; }
container_pid=""
log "root made ($(elapsed))"

# The check and its unit go into the root; both .debs go to /root/debs.
mkdir -p "$root/root/debs" "$root/hilo-boot-check" "$root/usr/local/libexec"
cp "$old_deb" "$new_deb" "$root/root/debs/"
install -m 0755 "$here/boot_check.sh" "$root/usr/local/libexec/hilo-boot-check"
cat >"$root/etc/systemd/system/hilo-boot-check.service" <<EOF
[Unit]
Description=hilo-server checks of deb_boot_test.sh
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/libexec/hilo-boot-check $old_version $new_version $exposure_bound
StandardOutput=journal
[Install]
WantedBy=multi-user.target
EOF
ln -s /etc/systemd/system/hilo-boot-check.service \
  "$root/etc/systemd/system/multi-user.target.wants/hilo-boot-check.service"
# A container has no consoles to log in on.
ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"

# apt installs the previous .deb as docs/install.md says, its dependencies
# from the mirror; systemd does not run yet (nspawn without -b).
log "apt-get install hilo-server $old_version"
"${contained[@]}" timeout 150 systemd-nspawn -q --register=no --keep-unit -D "$root" \
  --setenv=DEBIAN_FRONTEND=noninteractive sh -c "
    apt-get update -q && apt-get install -y -q --no-install-recommends \
      /root/debs/$(basename "$old_deb")" \
  >"$work/apt.log" 2>&1 </dev/null ||
  { tail -30 "$work/apt.log"; fail "apt-get install of $old_deb (log above)"; }
log "installed: $(grep -c '^Setting up ' "$work/apt.log") packages set up ($(elapsed))"

# Boot, with a network namespace of its own (only loopback): the node's
# ports are the packaged ones, and this machine's may be taken. The check
# powers the container off; timeout ends it otherwise (SIGTERM asks nspawn to
# shut the container down, SIGKILL follows).
log "booting (at most $boot_seconds s)"
"${contained[@]}" timeout -k 10 "$boot_seconds" systemd-nspawn -q -b --register=no \
  --keep-unit --private-network --console=pipe -D "$root" \
  >"$work/boot.log" 2>&1 </dev/null &
container_pid=$!
boot_status=0
wait "$container_pid" || boot_status=$?
container_pid=""
log "container ended with status $boot_status ($(elapsed))"

cat "$root/hilo-boot-check/log" 2>/dev/null || true
if [ ! -f "$root/hilo-boot-check/result" ]; then
  tail -40 "$work/boot.log"
  fail "the check left no result (container status $boot_status)"
fi
result=$(cat "$root/hilo-boot-check/result")
if [ "$result" != PASS ]; then
  grep -E 'hilo|Failed' "$root/hilo-boot-check/journal" | tail -40 || true
  fail "${result#FAIL: }"
fi
log "PASS: hilo.service served, kept its files private, rated <= $exposure_bound," \
  "stopped cleanly, and kept its database across the upgrade ($(elapsed))"
