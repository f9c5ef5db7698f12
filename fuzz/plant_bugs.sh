#!/bin/bash
# Shows that the fuzzer's model catches a wrong rule, not only drift: plants
# one bug at a time into a COPY of service/store/collection_rules.cc (the
# tree is never touched), builds the fuzzer on that copy with clang, and
# fuzzes it from an empty corpus with -seed=1 (not fuzz/corpus/, which holds
# inputs that already catch these bugs) for at most SECONDS each.
#
#   fuzz/plant_bugs.sh [SECONDS] [WORK_DIR] [BUG...]
#                                   (defaults 180, build/plant, every bug)
#
# The bugs, each a rule of the README's contract broken:
#   floor     SetFloor leaves the return floor where it was (a floor ignored)
#   token     a return applied to part of a range keeps its token live (a
#             token not retired)
#   previous  a whole return that gives the previous range back keeps it as
#             the previous one too, so the next whole return gives it back
#             again (a previous range restored twice)
#   stale     PostgreSQL only (planted into postgres_batch_runner.cc): an
#             operation on a row another session holds is not set aside but
#             run at once on that row as this store read it last (a stale
#             Max), waiting for the lock to write it. Only two stores on one
#             database that collide on rows reach it: it runs when
#             $HILO_FUZZ_POSTGRES_URI names a database, with the fuzzer's two
#             pods at once (HILO_FUZZ_POSTGRES_CONCURRENT=1), and is left
#             out otherwise.
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
    "stale": ("""  std::set<std::string> held;
  if (existing_at >= 0) {
    const PGresult* r = results[existing_at].get();
    for (int i = 0; i < PQntuples(r); ++i) {
      std::string name(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
      if (rows.find(name) == rows.end()) held.insert(std::move(name));
    }
  }
""", """  std::set<std::string> held;
  // PLANTED: a held row is run on as this store read it last.
  static thread_local std::map<std::string, CollectionState> seen;
  for (const auto& [n, row] : rows) {
    if (row.stored.has_value()) seen[n] = *row.stored;
  }
  if (existing_at >= 0) {
    const PGresult* r = results[existing_at].get();
    for (int i = 0; i < PQntuples(r); ++i) {
      std::string name(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
      if (rows.find(name) != rows.end()) continue;
      auto it = seen.find(name);
      if (it == seen.end()) {
        held.insert(std::move(name));
        continue;
      }
      rows[name].stored = it->second;
      rows[name].now = it->second;
    }
  }
"""),
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

shift 2 2>/dev/null || shift $#
bugs=${*:-floor token previous stale}
for bug in $bugs; do
  file=service/store/collection_rules.cc
  env=()
  flags=()
  if [ "$bug" = stale ]; then
    if [ -z "${HILO_FUZZ_POSTGRES_URI:-}" ]; then
      echo "plant_bugs: stale: left out (PostgreSQL only; set HILO_FUZZ_POSTGRES_URI)"
      continue
    fi
    file=service/store/postgres/postgres_batch_runner.cc
    env=(HILO_FUZZ_POSTGRES_CONCURRENT=1)
    # Full-length inputs from the start: the short ones libFuzzer begins
    # with hold too few batches to make the pods collide (3,886 runs in
    # 180 s set nothing aside).
    flags=(-len_control=0)
  fi
  copy=$work/$bug
  rm -rf "$copy"
  mkdir -p "$copy"
  cp -r "$root/fuzz" "$root/service" "$root/base" "$copy/"
  if ! plant "$bug" "$copy/$file"; then
    echo "plant_bugs: $bug: its lines are no longer in $file"
    exit 2
  fi
  cmake -S "$copy/fuzz" -B "$copy/build" -G Ninja \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
    >/dev/null || exit 2
  cmake --build "$copy/build" -j 2 >/dev/null || exit 2
  mkdir -p "$copy/empty" "$copy/artifacts" "$scratch/$bug"
  start=$(date +%s)
  env HILO_FUZZ_DIR="$scratch/$bug" "${env[@]}" \
    "$copy/build/range_store_fuzzer" -seed=1 \
    -max_total_time="$seconds" -max_len=1024 "${flags[@]}" \
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
