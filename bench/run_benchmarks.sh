#!/bin/sh
# Runs every hilo benchmark and writes BENCHMARKS.md-ready tables and the
# throughput plot.
#
#   bench/run_benchmarks.sh                 # full run, a few minutes
#   bench/run_benchmarks.sh --update-docs   # ... and refresh BENCHMARKS.md
#   bench/run_benchmarks.sh --smoke         # seconds; numbers mean nothing
#
# Options:
#   --build-dir DIR  build tree to use (default build/bench); configured as
#                    Release and built unless --no-build
#   --no-build       use the binaries already in --build-dir
#   --out DIR        where results go (default <build-dir>/bench-results):
#                    report.md (all tables), machine.md, server.md,
#                    client.md, throughput.tsv, throughput.png, logs
#   --update-docs    also replace the generated part of BENCHMARKS.md and
#                    bench/throughput.png with this run's
#   --smoke          seconds-long runs, for the test suite
#
# Needs scripts/install-deps.sh and scripts/install-deps-bench.sh (gnuplot,
# Google Benchmark, libuuid; PostgreSQL and pgbench for the PostgreSQL
# series, bench/postgresql_bench.sh; Redis for bench/peers_bench.sh). Scratch databases go to $TMPDIR or /tmp, which
# decides the disk that is measured. Servers bind 127.0.0.1:0 only.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$repo/build/bench"
out=""
build=1
smoke=0
update_docs=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --smoke) smoke=1; shift ;;
    --update-docs) update_docs=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run_benchmarks: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$build_dir/bench-results"
if [ "$smoke" = 1 ] && [ "$update_docs" = 1 ]; then
  echo "run_benchmarks: a smoke run's numbers never go into BENCHMARKS.md" >&2
  exit 2
fi
command -v gnuplot >/dev/null 2>&1 || {
  echo "run_benchmarks: gnuplot is missing; run scripts/install-deps-bench.sh" >&2
  exit 1
}

if [ "$build" = 1 ]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target hilo_server hilo_bench client_benchmark
fi
hilo_bench="$build_dir/bench/hilo_bench"
client_benchmark="$build_dir/bench/client_benchmark"
for bin in "$hilo_bench" "$client_benchmark"; do
  [ -x "$bin" ] || { echo "run_benchmarks: $bin is not built" >&2; exit 1; }
done
mkdir -p "$out"

# The machine, as it was when the run started.
data_dir=${TMPDIR:-/tmp}
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]; then
  commit="$commit + uncommitted changes"
fi
version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# CPU ticks all processes used (busy: not idle, not iowait), and ticks this
# script's finished children used; the difference at the end is what other
# work on the machine took while the benchmarks ran.
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
own_ticks() { awk '{sub(/^.*\) /, ""); print $14 + $15}' "/proc/$$/stat"; }
busy_before=$(busy_ticks)
steal_before=$(steal_ticks)
own_before=$(own_ticks)
seconds_before=$(date +%s)
{
  echo "### Machine"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date (UTC) | $(date -u '+%Y-%m-%d %H:%M') |"
  echo "| commit | $commit |"
  echo "| CPU | $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores$(lscpu | sed -n 's/^Hypervisor vendor: *\(.*\)/, virtual machine (\1)/p') |"
  echo "| memory | $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) |"
  echo "| OS | $(. /etc/os-release && echo "$PRETTY_NAME"), Linux $(uname -r) |"
  echo "| disk of the databases | $data_dir: $(findmnt -n -o SOURCE,FSTYPE -T "$data_dir" | tr -s ' ' | sed 's/ / (/; s/$/)/'), write cache: $(cat /sys/block/"$(basename "$(findmnt -n -o SOURCE -T "$data_dir")")"/queue/write_cache 2>/dev/null || echo '?') |"
  echo "| build | $build_type, $(c++ --version | head -n1) |"
  echo "| libraries | gRPC $(version libgrpc++-dev), SQLite $(version libsqlite3-dev), Abseil $(version libabsl-dev), Google Benchmark $(version libbenchmark-dev), libuuid $(version uuid-dev) |"
  echo "| load average before the run | $load_before |"
} >"$out/machine.md"

echo "run_benchmarks: hilo_bench (progress on stderr; log in $out/hilo_bench.log)" >&2
smoke_flag=""
[ "$smoke" = 1 ] && smoke_flag="--smoke"
# shellcheck disable=SC2086
"$hilo_bench" $smoke_flag --out_md="$out/server.md" \
  --out_data="$out/throughput.tsv" >"$out/hilo_bench.log" 2>&1 || {
  tail -n 20 "$out/hilo_bench.log" >&2
  echo "run_benchmarks: hilo_bench failed" >&2
  exit 1
}

# What metrics cost: the server's CPU per NextRange with metrics off (the
# last --metrics_listen wins), beside the run above (metrics on).
echo "run_benchmarks: hilo_bench, throughput with metrics off (log in $out/hilo_bench_no_metrics.log)" >&2
# shellcheck disable=SC2086
"$hilo_bench" $smoke_flag --sections=throughput --in_flight=64,256 \
  --server_flags=--metrics_listen= --out_md="$out/server_no_metrics.md" \
  >"$out/hilo_bench_no_metrics.log" 2>&1 || {
  tail -n 20 "$out/hilo_bench_no_metrics.log" >&2
  echo "run_benchmarks: hilo_bench (metrics off) failed" >&2
  exit 1
}
# Server CPU µs per request of "NextRange, 1 collection" at `in flight`,
# from the CPU table of a hilo_bench report.
server_cpu() {
  awk -v level="$2" '/^### CPU per request/ { table = 1; next }
    /^### / { table = 0 }
    table && $0 ~ "^\\| " level " \\|" { split($0, f, "|"); split(f[3], v, "/");
      gsub(/ /, "", v[1]); print v[1]; exit }' "$1"
}
{
  echo "### Metrics cost"
  echo
  echo "| in flight | server CPU per NextRange (1 collection), metrics on | metrics off | metrics' share | target |"
  echo "|---:|---:|---:|---:|---:|"
  for level in 64 256; do
    on=$(server_cpu "$out/server.md" "$level")
    off=$(server_cpu "$out/server_no_metrics.md" "$level")
    awk -v level="$level" -v on="$on" -v off="$off" 'BEGIN {
      if (on == "" || off == "" || on <= 0) { printf "| %s | %s | %s | ? | < 5%% |\n", level, on, off; exit }
      printf "| %s | %s µs | %s µs | %.1f%% | < 5%% |\n", level, on, off, 100 * (on - off) / on }'
  done
  echo
  echo "Two runs of hilo_bench's throughput series, one with the server's metrics on (the run above) and one"
  echo "with \`--metrics_listen=\` (off); wall-clock CPU of the server process, so noisy on a busy machine."
} >"$out/metrics.md"

echo "run_benchmarks: NextRange on PostgreSQL beside UPDATE ... RETURNING" >&2
"$repo/bench/postgresql_bench.sh" "$hilo_bench" "$out/throughput.tsv" \
  "$out/postgresql.md" "$out/postgresql_peers.tsv" $smoke_flag

echo "run_benchmarks: client_benchmark (log in $out/client_benchmark.log)" >&2
if [ "$smoke" = 1 ]; then
  client_flags="--smoke"
else
  # Interleaved, so a burst of other load on the machine is spread over
  # all benchmarks rather than landing on one.
  client_flags="--benchmark_repetitions=5 --benchmark_min_time=0.3 --benchmark_enable_random_interleaving=true"
fi
# shellcheck disable=SC2086
"$client_benchmark" $client_flags --benchmark_color=false \
  --benchmark_out="$out/client.json" --benchmark_out_format=json \
  --out_md="$out/client.md" >"$out/client_benchmark.log" 2>&1 || {
  tail -n 20 "$out/client_benchmark.log" >&2
  echo "run_benchmarks: client_benchmark failed" >&2
  exit 1
}

echo "run_benchmarks: Redis beside hilo, and the side-by-side tables" >&2
"$repo/bench/peers_bench.sh" "$out/throughput.tsv" "$out/postgresql_peers.tsv" \
  "$out/client.json" "$out/peers.md" "$out/peers.tsv" $smoke_flag

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
core_seconds() {  # ticks -> "N of M core-seconds (P%)" of the run
  awk -v ticks="$1" -v secs="$(( $(date +%s) - seconds_before ))" \
    -v cores="$(nproc)" -v hz="$(getconf CLK_TCK)" 'BEGIN {
      s = ticks / hz; if (s < 0) s = 0; all = secs * cores
      printf "%.0f of %d core-seconds (%.1f%%)", s, all, 100 * s / all
    }'
}
other=$(core_seconds "$(( $(busy_ticks) - busy_before - ($(own_ticks) - own_before) ))")
stolen=$(core_seconds "$(( $(steal_ticks) - steal_before ))")
{
  echo "| load average after the run | $load_after (the benchmarks' own threads count too) |"
  echo "| CPU used by other processes during the run | $other |"
  echo "| CPU stolen by the hypervisor during the run | $stolen |"
} >>"$out/machine.md"

subtitle="$(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores; $(date -u '+%Y-%m-%d')"
[ "$smoke" = 1 ] && subtitle="SMOKE RUN: numbers mean nothing"
gnuplot -e "data='$out/throughput.tsv'; peers='$out/peers.tsv'; out='$out/throughput.png'; subtitle='$subtitle'" \
  "$repo/bench/plot_throughput.gp"

# report.md: everything BENCHMARKS.md's generated part holds.
{
  cat "$out/machine.md"
  echo
  cat "$out/server.md"
  echo
  cat "$out/metrics.md"
  echo
  echo "![Requests per second against requests in flight](bench/throughput.png)"
  echo
  cat "$out/postgresql.md"
  echo
  cat "$out/client.md"
  echo
  cat "$out/peers.md"
} >"$out/report.md"

for table in "### Server throughput" "### Targets at 64 in flight" \
    "### Metrics cost" \
    "### NextRange on PostgreSQL" \
    "### Client with" "### Memory" "### Client fast path" "### Client targets" \
    "### Side by side"; do
  grep -q "^$table" "$out/report.md" || {
    echo "run_benchmarks: report.md lacks \"$table\"" >&2
    exit 1
  }
done
[ -s "$out/throughput.png" ] || { echo "run_benchmarks: no plot" >&2; exit 1; }

if [ "$update_docs" = 1 ]; then
  doc="$repo/BENCHMARKS.md"
  begin='<!-- BEGIN GENERATED by bench/run_benchmarks.sh -->'
  end='<!-- END GENERATED -->'
  grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || {
    echo "run_benchmarks: $doc lacks the generated-section markers" >&2
    exit 1
  }
  awk -v begin="$begin" -v end="$end" -v report="$out/report.md" '
    $0 == begin { print; while ((getline line < report) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }' "$doc" >"$out/BENCHMARKS.md.new"
  cat "$out/BENCHMARKS.md.new" >"$doc"
  cp "$out/throughput.png" "$repo/bench/throughput.png"
  echo "run_benchmarks: updated $doc and bench/throughput.png" >&2
fi
echo "run_benchmarks: wrote $out/report.md and $out/throughput.png" >&2
