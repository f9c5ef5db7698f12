#!/bin/sh
# A hilo_server on PostgreSQL whose node tag another server has taken over
# (as after a partition longer than the tag's claim) must stop serving under
# that tag: it exits with status 4, saying who holds the tag now, for its
# supervisor to start it again under a free one. Refusals it audited before
# are all in its audit log after the exit, one line each or counted in a
# summary line (the exit does not flush what a clean stop would).
#
#   tag_taken_test.sh HILO_SERVER POSTGRES_DIR   (the CTest fixture's dir)
set -eu
server=$1
uri=$(cat "$2/uri")
work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-tag-taken.XXXXXX")
schema="tag_taken_$$"
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  psql -qX "$uri" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
fail() {
  echo "tag_taken_test: $*" >&2
  sed 's/^/  hilo_server: /' "$work/stderr" >&2
  exit 1
}

psql -qX "$uri" -c "CREATE SCHEMA $schema"
store="$uri?options=-csearch_path%3D$schema"
"$server" --store="$store" --node_tag=T --listen=127.0.0.1:0 \
  --metrics_listen= --audit_log="$work/audit.log" 2>"$work/stderr" &
pid=$!
tries=0
until grep -q "serving node T on port" "$work/stderr"; do
  kill -0 "$pid" 2>/dev/null || fail "exited before serving"
  tries=$((tries + 1))
  [ "$tries" -le 300 ] || fail "no start-up line within 30 s"
  sleep 0.1
done

# 400 refusals at once: more than the 100 a second the audit log writes a
# line each for.
port=$(sed -n 's/.* on port \([0-9]*\) .*/\1/p' "$work/stderr" | head -n 1)
[ -n "$port" ] || fail "no port in the start-up line"
audit_refusals="$(dirname "$0")/../abuse/audit_refusals.py"
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$audit_refusals" refuse "$port" 400 ||
  fail "the guard rail did not refuse all 400 calls"

psql -qX "$store" -c "UPDATE hilo_nodes SET holder = 'thief pid 1' WHERE tag = 'T'"
# The next renewal (every second) finds the tag taken.
tries=0
while kill -0 "$pid" 2>/dev/null; do
  tries=$((tries + 1))
  [ "$tries" -le 300 ] || fail "still running 30 s after its tag was taken"
  sleep 0.1
done
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 4 ] || fail "exit status $status, expected 4"
grep -qF 'node tag T is now held by "thief pid 1"; this server could not renew its claim for 10s' \
  "$work/stderr" || fail "no line naming the new holder"
grep -qF "exiting with status 4 for the supervisor to restart the server under a free tag" \
  "$work/stderr" || fail "no line saying why it exits"
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$audit_refusals" check "$work/audit.log" 400 ||
  fail "refusals missing from the audit log"
echo "tag_taken_test: exited with status 4 once its tag was taken"
