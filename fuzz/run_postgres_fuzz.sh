#!/bin/sh
# The store fuzzer against PostgreSQL, for ctest (e2e.postgresql_fuzz): the
# committed seeds, each of which must replay its trace in fuzz/seed_traces/
# exactly as on SQLite, then N pseudo-random inputs from a fixed seed (the
# same ones every run), all judged by the same contract model.
#
#   fuzz/run_postgres_fuzz.sh REPLAY_BINARY POSTGRES_DIR N
#
# POSTGRES_DIR is a cluster of tests/postgres/temp_postgres.sh (its uri file
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
  echo "run_postgres_fuzz: no $dir/uri: start the cluster first (tests/postgres/temp_postgres.sh start $dir)" >&2
  exit 1
}
HILO_FUZZ_POSTGRES_URI=$(cat "$dir/uri")
export HILO_FUZZ_POSTGRES_URI
"$root/fuzz/check_seed_traces.sh" "$replay" "$root/fuzz/corpus" \
  "$root/fuzz/seed_traces"
start=$(date +%s)
"$replay" "--random=$runs" >/dev/null
echo "run_postgres_fuzz: $runs pseudo-random inputs kept every rule on PostgreSQL ($(( $(date +%s) - start )) s)"
