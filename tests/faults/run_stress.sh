#!/bin/bash
# Runs hilo_stress and checks its summary line.
#
#   run_stress.sh [--tmpfs=SIZE] [--expect=REGEX]... -- HILO_STRESS [ARG...]
#
# Passes when hilo_stress exits 0 and its summary line reads
# "hilo_stress: PASS ..." with duplicates=0, outside_ranges=0 and
# overlapping_ranges=0, and matches every --expect extended regular
# expression (e.g. ' kills=12 '). A work directory is made under $TMPDIR and
# passed as --work_dir; it is removed at the end, pass or fail, unless
# HILO_KEEP_STRESS_DIR is set.
#
# With --tmpfs the run happens in a private mount namespace (unshare
# --mount) with a tmpfs of SIZE mounted on <work dir>/db, passed as --db_dir
# (for --fill). The mount lives only as long as the namespace, so nothing is
# left mounted whatever happens. Exits 77 (skipped), naming the reason, if
# this user may not make the namespace or the mount (not root, or a container
# without CAP_SYS_ADMIN).
set -u

tmpfs=""
expects=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tmpfs=*) tmpfs=${1#--tmpfs=}; shift ;;
    --expect=*) expects+=("${1#--expect=}"); shift ;;
    --) shift; break ;;
    *) echo "run_stress: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ $# -lt 1 ]; then
  echo "usage: $0 [--tmpfs=SIZE] [--expect=REGEX]... -- HILO_STRESS [ARG...]" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-faults.XXXXXX") || exit 1
cleanup() {
  if [ -n "${HILO_KEEP_STRESS_DIR:-}" ]; then
    echo "run_stress: kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
# hilo_stress runs in the background as $child, so that a signal stops it
# (and with it, by PR_SET_PDEATHSIG, its workers and servers) instead of
# waiting for it (faults_lib.sh's on_signal).
. "$(dirname "$0")/faults_lib.sh"

if [ -n "$tmpfs" ]; then
  mkdir -p "$work/db"
  require_private_tmpfs run_stress "$work/db" "$tmpfs"
  # shellcheck disable=SC2016
  unshare --mount --propagation private -- /bin/sh -c '
    set -e
    db=$1; size=$2; shift 2
    mount -t tmpfs -o "size=$size" hilo-faults "$db"
    exec "$@"' sh "$work/db" "$tmpfs" \
    "$@" --work_dir="$work/run" --db_dir="$work/db" >"$work/out" 2>"$work/err" &
  child=$!
else
  "$@" --work_dir="$work/run" >"$work/out" 2>"$work/err" &
  child=$!
fi
code=0
wait "$child" || code=$?

# What hilo_stress said as it went (faults, recovery), then its verdict.
cat "$work/err"
cat "$work/out"
summary=$(grep '^hilo_stress: ' "$work/out" | tail -n 1)
fail() {
  echo "run_stress: FAILED: $1"
  exit 1
}
[ "$code" -eq 0 ] || fail "hilo_stress exited $code"
[ -n "$summary" ] || fail "no summary line"
case "$summary" in
  "hilo_stress: PASS "*) ;;
  *) fail "the summary does not say PASS" ;;
esac
for must in ' duplicates=0 ' ' outside_ranges=0 ' ' overlapping_ranges=0 ' \
  ' problems=0$' "${expects[@]}"; do
  echo "$summary" | grep -Eq -- "$must" || fail "the summary does not match '$must'"
done
echo "run_stress: OK"
