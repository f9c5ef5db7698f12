#!/bin/bash
# Runs inside the booted Debian 12 root of deb_boot_test.sh, as the oneshot
# unit hilo-boot-check.service, once the system is up. The previous
# hilo-server is installed and the new one waits in /root/debs. It drives
# hilo.service the way docs/install.md tells an operator, checks each step,
# writes every line to /hilo-boot-check/log and its verdict (PASS, or FAIL
# and the reason) to /hilo-boot-check/result, and powers the container off.
#
#   boot_check.sh OLD_VERSION NEW_VERSION EXPOSURE_BOUND
set -uo pipefail

old_version=$1 new_version=$2 exposure_bound=$3
out=/hilo-boot-check
exec >>"$out/log" 2>&1

finish() {
  echo "$1" >"$out/result.tmp" && mv "$out/result.tmp" "$out/result"
  journalctl -b --no-pager -o short-monotonic >"$out/journal" 2>&1
  systemctl --no-block poweroff
  exit 0
}

fail() {
  echo "FAIL: $*"
  finish "FAIL: $*"
}

step() {
  echo "--- $*"
}

# The value of the word --NAME=VALUE in /etc/default/hilo's HILO_FLAGS.
default_flag() {
  local flags word
  flags=$(set -a && . /etc/default/hilo && printf '%s' "$HILO_FLAGS")
  for word in $flags; do
    case "$word" in --"$1"=*) printf '%s' "${word#--"$1"=}" ;; esac
  done
}

installed_version() {
  dpkg-query -W -f='${Version}' hilo-server 2>/dev/null
}

# Waits (at most 20 s) until the node answers health with SERVING.
wait_serving() {
  local status=""
  for _ in $(seq 1 100); do
    status=$(hilo --target="$target" --timeout=1s health 2>&1) &&
      grep -q '^SERVING' <<<"$status" && return 0
    sleep 0.2
  done
  fail "hilo.service does not serve on $target after 20 s: $status;" \
    "$(systemctl status --no-pager hilo 2>&1 | tail -20)"
}

# hilo.service is active and its main process is the packaged binary.
expect_active() {
  local state
  state=$(systemctl is-active hilo)
  [ "$state" = active ] || fail "hilo.service is $state, not active: " \
    "$(systemctl status --no-pager hilo 2>&1 | tail -20)"
}

# Draws 3 IDs of orders through the CLI; they must be FIRST..FIRST+2.
expect_draw() {
  local first=$1 ids want
  ids=$(hilo --target="$target" next orders -n 3 2>&1) ||
    fail "hilo next orders -n 3: $ids"
  want=$(printf 'orders/%d-%s\n' "$first" "$tag" "$((first + 1))" "$tag" \
    "$((first + 2))" "$tag")
  [ "$ids" = "$want" ] || fail "hilo next orders -n 3 printed '$ids', want '$want'"
  echo "drew: $(tr '\n' ' ' <<<"$ids")"
}

# The state directory is the service user's alone: the directory 0700, every
# file in it 0600, all owned by hilo:hilo, and the database is there.
expect_private_files() {
  local user group line
  user=$(systemctl show -P User hilo) group=$(systemctl show -P Group hilo)
  [ -s /var/lib/hilo/hilo.db ] || fail "no database /var/lib/hilo/hilo.db"
  line=$(stat -c '%a %U:%G' /var/lib/hilo)
  [ "$line" = "700 $user:$group" ] || fail "/var/lib/hilo is $line, want 700 $user:$group"
  while IFS= read -r -d '' file; do
    line=$(stat -c '%a %U:%G %F' "$file")
    [ "$line" = "600 $user:$group regular file" ] ||
      fail "$file is $line, want 600 $user:$group regular file"
    echo "private: $file $line"
  done < <(find /var/lib/hilo -mindepth 1 -print0)
}

# systemd-analyze security rates the unit at most EXPOSURE_BOUND.
expect_exposure() {
  local report exposure
  report=$(systemd-analyze security --no-pager hilo.service 2>&1)
  exposure=$(sed -n 's/.*Overall exposure level for hilo.service: \([0-9.]*\).*/\1/p' \
    <<<"$report")
  [ -n "$exposure" ] || fail "systemd-analyze security printed no exposure: $report"
  awk -v e="$exposure" -v b="$exposure_bound" 'BEGIN { exit !(e <= b) }' ||
    fail "exposure $exposure exceeds $exposure_bound: $(grep '✗' <<<"$report")"
  echo "exposure: $exposure (bound $exposure_bound)"
}

# systemctl stop returns within TimeoutStopSec and the process exited 0 on
# SIGTERM (a kill after the timeout leaves Result=timeout).
expect_clean_stop() {
  local limit_us start end elapsed_ms result status
  limit_us=$(systemctl show -P TimeoutStopUSec hilo)
  limit_us=$(systemd-analyze timespan "$limit_us" | sed -n 's/^ *μs: //p')
  [[ "$limit_us" =~ ^[0-9]+$ ]] || fail "TimeoutStopSec unreadable: $limit_us"
  start=$(date +%s%N)
  timeout $((limit_us / 1000000 + 10)) systemctl stop hilo ||
    fail "systemctl stop hilo failed or hung"
  end=$(date +%s%N)
  elapsed_ms=$(((end - start) / 1000000))
  [ "$(systemctl is-active hilo)" = inactive ] ||
    fail "hilo.service is $(systemctl is-active hilo) after stop"
  result=$(systemctl show -P Result hilo)
  status=$(systemctl show -P ExecMainStatus hilo)
  if [ "$result" != success ] || [ "$status" != 0 ]; then
    fail "stop ended with Result=$result ExecMainStatus=$status"
  fi
  [ "$elapsed_ms" -le $((limit_us / 1000)) ] ||
    fail "systemctl stop took ${elapsed_ms} ms; TimeoutStopSec is $((limit_us / 1000)) ms"
  echo "stopped in ${elapsed_ms} ms (TimeoutStopSec $((limit_us / 1000)) ms), exit 0"
}

step "booted: $(systemctl is-system-running 2>&1)"
[ "$(installed_version)" = "$old_version" ] ||
  fail "hilo-server $(installed_version) is installed, want $old_version"

# The package neither enables nor starts the service (postinst): the operator
# sets the node tag first.
state=$(systemctl is-active hilo)
[ "$state" = inactive ] || fail "hilo.service is $state right after install"
tag=$(default_flag node_tag)
if [ -z "$tag" ]; then
  # As shipped it names no tag (--require_node_tag): the service must refuse
  # to start, saying why, until the operator gives one.
  step "no node tag: the service must refuse to start"
  # Type=exec: start returns once the program runs; it then exits 1.
  systemctl start hilo || true
  refused=""
  for _ in $(seq 1 150); do
    if journalctl -u hilo --no-pager 2>/dev/null |
        grep -q -- "--require_node_tag: no node tag given"; then
      refused=yes
      break
    fi
    sleep 0.1
  done
  [ -n "$refused" ] ||
    fail "no refusal naming --require_node_tag in the journal: $(journalctl -u hilo --no-pager 2>&1 | tail -5)"
  systemctl stop hilo 2>/dev/null || true
  systemctl reset-failed hilo 2>/dev/null || true
  [ ! -e /var/lib/hilo/hilo.db ] || fail "the refused start created /var/lib/hilo/hilo.db"
  echo "/etc/default/hilo sets no --node_tag; writing --node_tag=A as an operator would"
  sed -i 's/^HILO_FLAGS="/HILO_FLAGS="--node_tag=A /' /etc/default/hilo
  tag=A
fi
target=$(default_flag listen)
[ -n "$target" ] || target=127.0.0.1:50051
echo "node tag $tag, target $target"

step "hilo-server $old_version: enable --now"
systemctl enable --now hilo || fail "systemctl enable --now hilo"
wait_serving
expect_active
expect_draw 1
expect_private_files
expect_exposure
expect_clean_stop

step "upgrade to $new_version while running"
systemctl start hilo || fail "systemctl start hilo"
wait_serving
pid_before=$(systemctl show -P MainPID hilo)
DEBIAN_FRONTEND=noninteractive timeout 60 apt-get install -y -q \
  "/root/debs/hilo-server_${new_version}_$(dpkg --print-architecture).deb" \
  </dev/null || fail "apt-get install of hilo-server $new_version"
[ "$(installed_version)" = "$new_version" ] ||
  fail "after the upgrade hilo-server $(installed_version) is installed"
# The package leaves a running node alone (docs/install.md): the operator
# restarts it.
pid_after=$(systemctl show -P MainPID hilo)
if [ "$pid_before" = 0 ] || [ "$pid_after" != "$pid_before" ]; then
  fail "the upgrade restarted or stopped hilo.service: MainPID $pid_before, then $pid_after"
fi
echo "upgraded; the running node (MainPID $pid_after) was left alone"
systemctl restart hilo || fail "systemctl restart hilo"
wait_serving
expect_active
expect_draw 4
expect_private_files
expect_exposure
expect_clean_stop

finish PASS
