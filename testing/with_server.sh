#!/bin/bash
# Runs a command against a real hilo_server started just for it.
#
#   with_server.sh SERVER_BIN [--tag=A] COMMAND [ARG...]
#
# Starts SERVER_BIN on 127.0.0.1:0 (the kernel picks a free port) with a
# fresh database in a temporary directory, reads the port from its start-up
# line, then runs COMMAND with HILO_TARGET=127.0.0.1:PORT in the environment
# and every argument that is exactly @TARGET@ replaced by that address.
# Afterwards the server gets SIGTERM and must exit 0; the temporary directory
# is removed. Exits with COMMAND's status (or 1 if the server misbehaved).
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 SERVER_BIN [--tag=A] COMMAND [ARG...]" >&2
  exit 2
fi
server_bin=$1
shift
tag=A
case "$1" in
  --tag=*) tag=${1#--tag=}; shift ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilo-lang.XXXXXX")
server_pid=""
watchdog_pid=""

stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null
  fi
}
cleanup() {
  [ -n "$watchdog_pid" ] && kill "$watchdog_pid" 2>/dev/null
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$server_bin" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --db="$tmp/hilo.db" --create_db --node_tag="$tag" \
  2>"$tmp/server.log" &
server_pid=$!
# If this script is killed outright (SIGKILL on a ctest timeout), the
# watchdog still stops the server.
(
  trap - EXIT
  while kill -0 $$ 2>/dev/null; do sleep 1; done
  kill -KILL "$server_pid" 2>/dev/null
  sleep 0.5
  rm -rf "$tmp"
) </dev/null >/dev/null 2>&1 &
watchdog_pid=$!

port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's/^hilo_server: serving node [^ ]* on port \([0-9][0-9]*\).*/\1/p' \
    "$tmp/server.log" | head -n 1)
  [ -n "$port" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "with_server: hilo_server did not start; its log:" >&2
  cat "$tmp/server.log" >&2
  exit 1
fi
target="127.0.0.1:$port"
echo "with_server: hilo_server node $tag on $target"

args=()
for a in "$@"; do
  if [ "$a" = "@TARGET@" ]; then args+=("$target"); else args+=("$a"); fi
done
HILO_TARGET=$target "${args[@]}"
status=$?

kill -TERM "$server_pid" 2>/dev/null
server_status=0
wait "$server_pid" || server_status=$?
server_pid=""
if [ "$server_status" -ne 0 ]; then
  echo "with_server: hilo_server exited with $server_status on SIGTERM; its log:" >&2
  cat "$tmp/server.log" >&2
  [ "$status" -eq 0 ] && status=1
fi
exit "$status"
