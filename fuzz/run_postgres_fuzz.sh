#!/bin/sh
# The store fuzzer against PostgreSQL, for ctest (e2e.postgresql_fuzz): the
# committed seeds, each of which must replay its trace in fuzz/seed_traces/
# exactly as on SQLite, then N pseudo-random inputs from a fixed seed (the
# same ones every run, though not the same interleavings), all judged by the
# same contract model. The inputs drive two stores on the database (two pods
# of one node, fuzz/store_under_test.h), the calls of each batch on both at
# once, so that they collide on rows and the batch runner's set-asides run;
# the run prints how often they did, and fails if they never did (the
# fuzzer would then no longer reach that path).
#
#   fuzz/run_postgres_fuzz.sh REPLAY_BINARY POSTGRES_DIR N
#
# POSTGRES_DIR is a cluster of testing/temp_postgres.sh (its uri file
# names the database). Collections are named per process and input, so runs
# never meet. A broken rule stops the run with the input in
# ./fuzz-failed-input; replay it with
#   HILO_FUZZ_POSTGRES_URI=... REPLAY_BINARY fuzz-failed-input
set -eu
replay=$1
dir=$2
runs=$3
root=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$dir/uri" ] || {
  echo "run_postgres_fuzz: no $dir/uri: start the cluster first (testing/temp_postgres.sh start $dir)" >&2
  exit 1
}
HILO_FUZZ_POSTGRES_URI=$(cat "$dir/uri")
export HILO_FUZZ_POSTGRES_URI
"$root/fuzz/check_seed_traces.sh" "$replay" "$root/fuzz/corpus" \
  "$root/fuzz/seed_traces"
start=$(date +%s)
report=$(mktemp)
trap 'rm -f "$report"' EXIT
HILO_FUZZ_POSTGRES_CONCURRENT=1 "$replay" "--random=$runs" >/dev/null \
  2>"$report" || { cat "$report" >&2; exit 1; }
cat "$report" >&2
echo "run_postgres_fuzz: $runs pseudo-random inputs kept every rule on PostgreSQL, two pods at once ($(( $(date +%s) - start )) s)"
set_aside=$(sed -n 's/^range_store_fuzzer: PostgreSQL: \([0-9]*\) operations set aside.*/\1/p' "$report")
if [ -z "$set_aside" ] || [ "$set_aside" -eq 0 ]; then
  echo "run_postgres_fuzz: no operation was ever set aside: the two pods never collided on a row, so the batch runner's set-aside path went untested" >&2
  exit 1
fi
