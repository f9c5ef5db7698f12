#!/bin/sh
# What users would pick instead of hilo, measured on the same machine in the
# same run: Redis INCR / INCRBY (with `appendfsync always`, and with no
# persistence as a ceiling), beside hilo's NextRange, PostgreSQL's numbers
# (bench/postgresql_bench.sh) and the client's per-ID costs
# (client_benchmark's JSON). Prints a Markdown section and a TSV of the
# Redis series for the plot.
#
#   peers_bench.sh THROUGHPUT_TSV POSTGRESQL_TSV CLIENT_JSON OUT_MD OUT_TSV [--smoke]
#
# THROUGHPUT_TSV: hilo_bench's series (column 2: NextRange, 1 collection;
# the no-op RPC by its header). POSTGRESQL_TSV: postgresql_bench.sh's peer
# figures (what, in flight, per second). CLIENT_JSON: Google Benchmark's
# --benchmark_out of client_benchmark. Each Redis runs from a temporary
# directory on $TMPDIR (the disk measured) on a free loopback port, driven
# by redis-benchmark with as many connections as requests in flight.
set -eu

throughput_tsv=$1
postgresql_tsv=$2
client_json=$3
out_md=$4
out_tsv=$5
smoke=${6:-}
for tool in redis-server redis-benchmark redis-cli python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "peers_bench: $tool is missing; run scripts/install-deps-bench.sh" >&2
    exit 1
  }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-peers-bench.XXXXXX")
pids=""
cleanup() {
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  [ -n "${HILO_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

in_flight="1 16 64 256"
requests=100000  # per run at 16 in flight and more
single=10000     # at 1 in flight, one round trip (and fsync) each
if [ "$smoke" = "--smoke" ]; then
  in_flight="1 64"
  requests=500
  single=200
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_redis NAME ARGS...: a redis-server in $work/NAME; sets $port.
start_redis() {
  name=$1
  shift
  mkdir -p "$work/$name"
  port=$(free_port)
  redis-server --bind 127.0.0.1 --port "$port" --dir "$work/$name" \
    --save "" --daemonize no --logfile "$work/$name/log" "$@" &
  pids="$pids $!"
  tries=0
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -le 100 ] || {
      cat "$work/$name/log" >&2
      echo "peers_bench: redis-server ($name) did not answer within 10 s" >&2
      exit 1
    }
    sleep 0.1
  done
}

# rps PORT CONNECTIONS REQUESTS COMMAND...: requests per second.
rps() {
  p=$1
  c=$2
  n=$3
  shift 3
  redis-benchmark -p "$p" -c "$c" -n "$n" --csv "$@" 2>"$work/benchmark.err" |
    awk -F'"' 'NR > 1 {value = $4} END {print value}'
}

# Durable: every write appended and fsync'ed before the reply.
start_redis always --appendonly yes --appendfsync always
always_port=$port
# Ceiling: nothing written to disk.
start_redis memory --appendonly no
memory_port=$port

printf 'in flight\tRedis INCRBY, appendfsync always\tRedis INCRBY, no persistence\n' \
  >"$out_tsv"
for n in $in_flight; do
  count=$requests
  [ "$n" -gt 1 ] || count=$single
  always=$(rps "$always_port" "$n" "$count" INCRBY hilo 32)
  memory=$(rps "$memory_port" "$n" "$count" INCRBY hilo 32)
  [ -n "$always" ] && [ -n "$memory" ] || {
    cat "$work/benchmark.err" >&2
    echo "peers_bench: redis-benchmark at $n connections gave no result" >&2
    exit 1
  }
  printf '%s\t%.0f\t%.0f\n' "$n" "$always" "$memory" >>"$out_tsv"
done
incr_one=$(rps "$memory_port" 1 "$single" INCR hilo_ids)

python3 - "$throughput_tsv" "$postgresql_tsv" "$client_json" "$out_tsv" \
  "$incr_one" "$out_md" <<'PY'
import csv
import json
import sys

throughput_tsv, postgresql_tsv, client_json, redis_tsv, incr_one, out_md = sys.argv[1:]


def series(path):
    """{column header: {in flight: value}} of a TSV whose first column is in flight."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    out = {}
    for header_index, header in enumerate(rows[0][1:], start=1):
        out[header] = {int(r[0]): float(r[header_index]) for r in rows[1:] if r}
    return out


hilo = series(throughput_tsv)
next_range = hilo["NextRange, 1 collection"]
no_op = next(v for k, v in hilo.items() if k.startswith("no-op RPC"))
redis = series(redis_tsv)
redis_always = redis["Redis INCRBY, appendfsync always"]
redis_memory = redis["Redis INCRBY, no persistence"]
postgresql = {}
with open(postgresql_tsv) as f:
    for what, n, value in csv.reader(f, delimiter="\t"):
        postgresql[(what, int(n))] = float(value)
with open(client_json) as f:
    benchmarks = json.load(f)["benchmarks"]


def per_second(name):
    """IDs per second of one thread: the median (or only) run of NAME/threads:1."""
    runs = [b for b in benchmarks if b["run_name"] == name + "/real_time/threads:1"]
    medians = [b for b in runs if b.get("aggregate_name") == "median"]
    run = (medians or [b for b in runs if b["run_type"] == "iteration"])[0]
    assert run["time_unit"] == "ns", run
    return 1e9 / run["real_time"]


def fmt(value):
    return f"{value:,.0f}"


def table(out, what, unit, rows):
    """A Markdown table of (what, rate) rows, rates right-aligned, then a blank line."""
    print(f"| {what} | {unit} |", file=out)
    print("|---|---:|", file=out)
    for name, value in rows:
        print(f"| {name} | {fmt(value)} |", file=out)
    print(file=out)


rows_one = [
    ("hilo client: `CollectionHandle::NextId` (number and tag)", per_second("BM_HandleNextId")),
    ("hilo client: `CollectionHandle::AppendDocumentId` (\"orders/10-A\" into a reused buffer)",
     per_second("BM_HandleAppendDocumentId")),
    ("hilo client: `NextDocumentId(\"orders\")` (a new `std::string`)", per_second("BM_NextDocumentId")),
    ("UUID v7 string (`absl::BitGen`, RFC 9562 layout, in process)", per_second("BM_UuidV7String")),
    ("UUID v4 string (libuuid `uuid_generate_random`)", per_second("BM_UuidV4String")),
    ("Redis `INCR`, one round trip per ID (no persistence)", float(incr_one)),
    ("PostgreSQL `nextval`, one round trip per ID (pgbench, 1 client)",
     postgresql[("nextval", 1)]),
]
rows_64 = [
    ("hilo `NextRange` (SQLite, `--sync=full`; each range any size)", next_range[64]),
    ("Redis `INCRBY` with `appendfsync always`", redis_always[64]),
    ("PostgreSQL `UPDATE ... RETURNING` per request (Leaf, Tinyid)",
     postgresql[("update_returning", 64)]),
    ("Redis `INCRBY`, no persistence (not durable: a ceiling)", redis_memory[64]),
    ("no-op gRPC call on the hilo server (not an allocation: a ceiling)", no_op[64]),
]
ratio = next_range[64] / redis_always[64]
with open(out_md, "w") as out:
    print("### Side by side: hilo and what users would pick instead", file=out)
    print(file=out)
    print("All measured in this run on this machine. IDs per second for one application thread "
          "(hilo's client with a range in hand; the peers as an application would call them, over "
          "loopback for the servers):", file=out)
    print(file=out)
    table(out, "one application thread", "IDs/s", rows_one)
    print("Durable allocations per second at 64 in flight (each allocation written and flushed "
          "to disk before its reply; redis-benchmark and pgbench with 64 connections, hilo_bench "
          "with 64 calls in flight), and two ceilings that are not durable allocations:", file=out)
    print(file=out)
    table(out, "64 in flight", "allocations/s", rows_64)
    print("| ratio at 64 in flight | measured | target | met |", file=out)
    print("|---|---:|---:|:---:|", file=out)
    met = "yes" if ratio >= 1.0 else "**no**"
    print(f"| NextRange ÷ Redis INCRBY with appendfsync always | {ratio:.2f} | ≥ 1.00 | {met} |",
          file=out)
PY
