#!/bin/sh
# scripts/dev-postgres.sh, as the docs show it: start prints a URI that
# psql and hilo_server can use, uri prints it again, stop keeps the data and
# uri then says it is not running, destroy removes the folder.
#
#   dev_postgres_test.sh HILO_SERVER
set -eu
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
server=$1
scratch=$(mktemp -d /tmp/hilo-dev-postgres-test.XXXXXX)
export HILO_DEV_POSTGRES_DIR="$scratch/pg"
dev="$ROOT/scripts/dev-postgres.sh"
cleanup() {
  [ -z "${pid:-}" ] || kill -9 "$pid" 2>/dev/null || true
  "$dev" destroy >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

uri=$("$dev" start)
case "$uri" in postgresql://*@127.0.0.1:*/*) ;; *) fail "start printed '$uri'" ;; esac
[ "$("$dev" uri)" = "$uri" ] || fail "uri does not print the URI start printed"

# The shared store on it: a node starts, reports serving, and stops on TERM.
"$server" --store="$uri" --node_tag=D --listen=127.0.0.1:0 \
  --metrics_listen= >"$scratch/server.log" 2>&1 &
pid=$!
i=0
until grep -q "serving node D" "$scratch/server.log"; do
  i=$((i + 1))
  [ $i -lt 300 ] || fail "hilo_server did not serve on it: $(cat "$scratch/server.log")"
  kill -0 "$pid" 2>/dev/null || fail "hilo_server exited: $(cat "$scratch/server.log")"
  sleep 0.1
done
kill -TERM "$pid"
wait "$pid" || fail "hilo_server did not exit 0 on TERM"
pid=

"$dev" stop >/dev/null
if "$dev" uri 2>"$scratch/err"; then fail "uri answered after stop"; fi
grep -q "not running" "$scratch/err" || fail "uri after stop: $(cat "$scratch/err")"
[ -f "$scratch/pg/data/PG_VERSION" ] || fail "stop removed the data"
"$dev" destroy >/dev/null
[ ! -e "$scratch/pg" ] || fail "destroy left $scratch/pg"
echo "ok: start, uri, a node on it, stop, destroy"
