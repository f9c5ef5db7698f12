#!/bin/bash
# hilo_server refuses to start on a read-only filesystem with one clear line
# and a non-zero exit, for an existing database and for new ones.
#
#   bad_start_test.sh HILO_SERVER
#
# Runs itself again inside a private mount namespace (unshare --mount) with a
# tmpfs: a server makes a database there and stops cleanly, the tmpfs is
# remounted read-only, and the server is started on it three ways. The mount
# ends with the namespace, so nothing is left mounted. Exits 77 (skipped),
# naming the reason, if this user may not make the namespace or the mount.
set -u

if [ $# -eq 1 ]; then
  server=$1
  mnt=$(mktemp -d "${TMPDIR:-/tmp}/hilo-bad-start.XXXXXX") || exit 1
  trap 'rm -rf "$mnt"' EXIT
  # on_signal stops the child (unshare execs the inner script, which stops
  # its server on TERM).
  . "$(dirname "$0")/faults_lib.sh"
  require_private_tmpfs bad_start_test "$mnt" 16m
  unshare --mount --propagation private -- "$0" --inside-namespace "$server" "$mnt" &
  child=$!
  wait "$child"
  exit $?
fi
if [ $# -ne 3 ] || [ "$1" != --inside-namespace ]; then
  echo "usage: $0 HILO_SERVER" >&2
  exit 2
fi

# ---- inside the namespace, never in the caller's: the mounts below must end
# with it.
if [ "$(readlink /proc/self/ns/mnt)" = "$(readlink /proc/1/ns/mnt)" ]; then
  echo "bad_start_test: refusing to mount outside a private mount namespace" >&2
  exit 2
fi
server=$2
mnt=$3
failures=0
fail() {
  echo "bad_start_test: FAILED: $1"
  failures=$((failures + 1))
}

mount -t tmpfs -o size=16m hilo-faults "$mnt" || exit 1

# A real database: a server creates it, serves, and stops on SIGTERM.
coproc SERVER {
  exec "$server" --listen=127.0.0.1:0 --metrics_listen= \
    --db="$mnt/data/hilo.db" --create_db 2>&1
}
# shellcheck disable=SC2153  # bash sets SERVER_PID with the coproc
server_pid=$SERVER_PID
trap 'kill -KILL "$server_pid" 2>/dev/null; exit 143' TERM INT
if ! IFS= read -r -t 20 line <&"${SERVER[0]}"; then
  echo "bad_start_test: FAILED: no start-up line within 20 s"
  kill -KILL "$server_pid" 2>/dev/null
  exit 1
fi
case "$line" in
  "hilo_server: serving node "*) ;;
  *) echo "bad_start_test: FAILED: unexpected start-up line: $line"
     kill -KILL "$server_pid" 2>/dev/null
     exit 1 ;;
esac
kill -TERM "$server_pid"
# It must stop by itself (within its drain and grace periods, 5 s by default).
for _ in $(seq 1 300); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server_pid" 2>/dev/null; then
  echo "bad_start_test: FAILED: still running 30 s after SIGTERM"
  kill -KILL "$server_pid" 2>/dev/null
  exit 1
fi
wait "$server_pid"
code=$?
[ "$code" -eq 0 ] || { echo "bad_start_test: FAILED: exit $code on SIGTERM"; exit 1; }
[ -s "$mnt/data/hilo.db" ] || { echo "bad_start_test: FAILED: no database made"; exit 1; }
mount -o remount,ro "$mnt" || { echo "bad_start_test: FAILED: cannot remount read-only"; exit 1; }

# expect_bad_start LABEL DB REGEX: one stderr line matching REGEX, nothing on
# stdout, a non-zero exit within 20 s. With --create_db, so that a new
# database fails for the mount, not for the missing flag.
expect_bad_start() {
  local label=$1 db=$2 regex=$3
  local out err code
  out=$(mktemp) err=$(mktemp)
  timeout -s KILL 20 "$server" --listen=127.0.0.1:0 --metrics_listen= \
    --db="$db" --create_db >"$out" 2>"$err"
  code=$?
  echo "$label: exit $code: $(cat "$err")"
  if [ "$code" -eq 0 ] || [ "$code" -eq 137 ]; then
    fail "$label: exit $code; want a non-zero exit of its own"
  fi
  if [ "$(wc -l <"$err")" -ne 1 ]; then
    fail "$label: $(wc -l <"$err") lines on stderr; want exactly one"
  elif ! grep -Eq -- "$regex" "$err"; then
    fail "$label: the line does not match '$regex'"
  fi
  [ -s "$out" ] && fail "$label: printed on stdout: $(cat "$out")"
  rm -f "$out" "$err"
}

expect_bad_start "existing database on a read-only mount" "$mnt/data/hilo.db" \
  "^hilo_server: .*$mnt/data/hilo\.db.*([Rr]ead-only|not writable)"
expect_bad_start "new database in an existing directory" "$mnt/data/new.db" \
  "^hilo_server: cannot open database $mnt/data/new\.db: .*$mnt/data is not writable: Read-only"
expect_bad_start "new database in a new directory" "$mnt/fresh/hilo.db" \
  "^hilo_server: .*cannot create directory $mnt/fresh.*[Rr]ead-only"

if [ "$failures" -gt 0 ]; then
  echo "bad_start_test: $failures failure(s)"
  exit 1
fi
echo "bad_start_test: OK"
