#!/bin/bash
# Shows that the fuzzer's model catches a wrong rule, not only drift: plants
# one bug at a time into a COPY of service/store/collection_rules.cc (the
# tree is never touched), builds the fuzzer on that copy with clang, and
# fuzzes it from an empty corpus with -seed=1 (not fuzz/corpus/, which holds
# inputs that already catch these bugs) for at most SECONDS each.
#
#   fuzz/plant_bugs.sh [SECONDS] [WORK_DIR]     (defaults 180, build/plant)
#
# The bugs, each a rule of the README's contract broken:
#   floor     SetFloor leaves the return floor where it was (a floor ignored)
#   token     a return applied to part of a range keeps its token live (a
#             token not retired)
#   previous  a whole return that gives the previous range back keeps it as
#             the previous one too, so the next whole return gives it back
#             again (a previous range restored twice)
# Prints, for each, how long the fuzzer took and the broken rule it named;
# exits 0 if every bug was caught, 1 if one survived, 2 if one could not be
# planted (collection_rules.cc changed: update the patterns below).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-180}
work=${2:-$root/build/plant}
survived=0
# The fuzzer's databases in memory when /dev/shm is there, as run_fuzz.sh
# does: on disk every commit waits for it, and a run does twenty times less.
scratch_base=${TMPDIR:-/tmp}
[ -w /dev/shm ] && scratch_base=/dev/shm
scratch=$(mktemp -d "$scratch_base/hilo-plant.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

plant() {  # plant NAME FILE: rewrites FILE, returns 2 if the line is gone
  python3 - "$1" "$2" <<'PY'
import sys
name, path = sys.argv[1], sys.argv[2]
old, new = {
    "floor": ("  next.return_floor = std::max(row.return_floor, floor);\n",
              "  next.return_floor = row.return_floor;  // PLANTED\n"),
    "token": ("    next.return_floor = last;\n  }\n  return next;",
              "    next.return_floor = last;\n"
              "    next.range_token = row.range_token;  // PLANTED\n"
              "  }\n  return next;"),
    "previous": ("    next.range_token = row.previous_token;\n",
                 "    next.range_token = row.previous_token;\n"
                 "    next.previous_token = row.previous_token;  // PLANTED\n"
                 "    next.previous_return_floor = row.previous_return_floor;\n"),
}[name]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(2)
open(path, "w").write(text.replace(old, new))
PY
}

for bug in floor token previous; do
  copy=$work/$bug
  rm -rf "$copy"
  mkdir -p "$copy"
  cp -r "$root/fuzz" "$root/service" "$root/base" "$copy/"
  if ! plant "$bug" "$copy/service/store/collection_rules.cc"; then
    echo "plant_bugs: $bug: its line is no longer in collection_rules.cc"
    exit 2
  fi
  cmake -S "$copy/fuzz" -B "$copy/build" -G Ninja \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
    >/dev/null || exit 2
  cmake --build "$copy/build" -j 2 >/dev/null || exit 2
  mkdir -p "$copy/empty" "$copy/artifacts" "$scratch/$bug"
  start=$(date +%s)
  HILO_FUZZ_DIR=$scratch/$bug "$copy/build/range_store_fuzzer" -seed=1 \
    -max_total_time="$seconds" -max_len=1024 \
    -artifact_prefix="$copy/artifacts/" "$copy/empty" >"$copy/run.log" 2>&1
  code=$?
  took=$(($(date +%s) - start))
  if [ "$code" -ne 0 ] && grep -q "CONTRACT BROKEN" "$copy/run.log"; then
    echo "plant_bugs: $bug: caught after ${took} s: $(grep -m1 'CONTRACT BROKEN' "$copy/run.log")"
  else
    echo "plant_bugs: $bug: NOT caught in ${took} s (exit $code; $copy/run.log)"
    survived=1
  fi
done
exit "$survived"
