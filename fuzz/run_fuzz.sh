#!/bin/bash
# Builds the store's libFuzzer target with clang and runs it.
#
#   fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]     fuzz for SECONDS (default 60)
#   fuzz/run_fuzz.sh --runs=N [BUILD_DIR]      N inputs from seed 1 (the
#                                              test): much the same inputs
#                                              every time
#
# Configures fuzz/ into BUILD_DIR (default build/fuzz) with clang++ if it is
# not configured yet and builds it (at most 2 jobs). Every run first replays
# fuzz/corpus/, the committed seeds and the inputs of crashes found before
# (regression cases). A timed run keeps what it learns in BUILD_DIR/corpus,
# which grows from run to run; a --runs run starts from fuzz/corpus/ alone
# with a fixed seed, so it does much the same work on every machine (not bit
# for bit: SQLite's random WAL salts can steer libFuzzer's comparisons). A crash or a broken invariant stops
# the run, leaves the input in BUILD_DIR/artifacts/ and exits 1; reproduce it
# with
#   BUILD_DIR/range_store_fuzzer BUILD_DIR/artifacts/crash-...
# and add it to fuzz/corpus/ once fixed, with its trace in fuzz/seed_traces/
# (docs/reliability.md, "Fuzzing the store"). Exits 77 (skipped), naming what is
# missing, without clang++ or libFuzzer (scripts/install-deps-faults.sh).
# With HILO_FUZZ_POSTGRES_URI set, the store fuzzed is PostgreSQL on that
# database instead of SQLite (fuzz/store_under_test.h).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
limit=(-max_total_time=60)
fixed=false
case "${1:-}" in
  --runs=*) limit=(-runs="${1#--runs=}" -seed=1); fixed=true; shift ;;
  [0-9]*) limit=(-max_total_time="$1"); shift ;;
  "") ;;
  *) echo "usage: $0 [SECONDS | --runs=N] [BUILD_DIR]" >&2; exit 2 ;;
esac
build=${1:-$root/build/fuzz}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "run_fuzz: SKIPPED: clang++ is not installed (scripts/install-deps-faults.sh)"
  exit 77
fi
mkdir -p "$build"
probe="$build/probe"
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -fsanitize=fuzzer -x c++ - -o "$probe" >"$probe.log" 2>&1; then
  echo "run_fuzz: SKIPPED: clang++ cannot link -fsanitize=fuzzer (Debian package libclang-rt-14-dev): $(head -n 1 "$probe.log")"
  exit 77
fi
rm -f "$probe" "$probe.log"

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root/fuzz" -B "$build" "${generator[@]}" \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null
fi
cmake --build "$build" -j 2 >/dev/null || cmake --build "$build" -j 1

# The fuzzer's scratch databases, removed even if it crashes: in memory when
# /dev/shm is there (no disk flushes: many more inputs a second).
scratch_base=${TMPDIR:-/tmp}
[ -w /dev/shm ] && scratch_base=/dev/shm
scratch=$(mktemp -d "$scratch_base/hilo-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if $fixed; then
  corpus=$scratch/corpus
else
  corpus=$build/corpus
fi
mkdir -p "$corpus" "$build/artifacts" "$scratch/db"

engine=SqliteRangeStore
[ -n "${HILO_FUZZ_POSTGRES_URI:-}" ] && engine="PostgresRangeStore on \$HILO_FUZZ_POSTGRES_URI"
echo "run_fuzz: fuzzing $engine (${limit[*]}, corpus $corpus and $root/fuzz/corpus)"
code=0
HILO_FUZZ_DIR=$scratch/db "$build/range_store_fuzzer" "${limit[@]}" \
  -max_len=1024 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" "$corpus" "$root/fuzz/corpus" \
  2>"$build/last-run.log" || code=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE)' \
  "$build/last-run.log" || true
if [ "$code" -ne 0 ]; then
  tail -n 60 "$build/last-run.log"
  echo "run_fuzz: FAILED (exit $code); the input is in $build/artifacts/"
  exit 1
fi
echo "run_fuzz: OK: no rule of the contract broken"
