#!/bin/sh
# NextRange on the PostgreSQL store beside the way Leaf and Tinyid allocate:
# one `UPDATE ... RETURNING` per request, autocommit, on the same database,
# driven by pgbench at the same concurrency. Prints a Markdown section, and
# the peers' figures for bench/peers_bench.sh as OUT_TSV (what, in flight,
# per second): update_returning at each concurrency, and nextval (one
# `SELECT nextval(...)` per ID, one client).
#
#   postgresql_bench.sh HILO_BENCH SQLITE_TSV OUT_MD OUT_TSV [--smoke]
#
# HILO_BENCH is the built hilo_bench; SQLITE_TSV the throughput series of the
# main (SQLite) run, for the side-by-side column ("" for none). A throwaway
# PostgreSQL 15 (testing/temp_postgres.sh, fsync and
# synchronous_commit on, as shipped) runs in $TMPDIR for the duration.
set -eu

hilo_bench=$1
sqlite_tsv=$2
out_md=$3
out_tsv=$4
smoke=${5:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
temp_postgres="$repo/testing/temp_postgres.sh"
command -v pgbench >/dev/null 2>&1 || {
  echo "postgresql_bench: pgbench is missing (package postgresql-client)" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-pg-bench.XXXXXX")
trap '[ -n "${HILO_KEEP:-}" ] || { "$temp_postgres" destroy "$work/db"; rm -rf "$work"; }' EXIT
# 256 clients of pgbench, plus the hilo server's one connection.
uri=$(HILO_PG_OPTIONS="-c max_connections=300" "$temp_postgres" start "$work/db")

in_flight="1,16,64,256"
pgbench_time=5
hilo_flags="--repetitions=3"
if [ "$smoke" = "--smoke" ]; then
  in_flight="1,64"
  pgbench_time=2
  hilo_flags="--smoke"
fi

# hilo: the throughput series of hilo_bench with every server on the
# database (each run's servers share it; collections continue across runs).
# shellcheck disable=SC2086
"$hilo_bench" $hilo_flags --sections=throughput --in_flight="$in_flight" \
  --server_flags="--store=$uri --node_tag_hashed_from_hostname" \
  --out_data="$work/hilo.tsv" \
  >"$work/hilo_bench.log" 2>&1 || {
  tail -n 20 "$work/hilo_bench.log" >&2
  echo "postgresql_bench: hilo_bench on PostgreSQL failed" >&2
  exit 1
}

# Leaf / Tinyid: one row per key, each request one UPDATE ... RETURNING.
psql -q -v ON_ERROR_STOP=1 "$uri" >/dev/null <<'SQL'
CREATE TABLE leaf_alloc (biz_tag TEXT PRIMARY KEY, max_id BIGINT NOT NULL,
                         step INT NOT NULL);
INSERT INTO leaf_alloc VALUES ('orders', 0, 32);
CREATE SEQUENCE ids;
SQL
echo "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 'orders' RETURNING max_id;" \
  >"$work/leaf.sql"
echo "SELECT nextval('ids');" >"$work/nextval.sql"
# pgbench SCRIPT CLIENTS: transactions per second.
pgbench_tps() {
  threads=$2
  [ "$threads" -gt 2 ] && threads=2
  tps=$(pgbench -n -f "$1" -c "$2" -j "$threads" -T "$pgbench_time" \
    "$uri" 2>"$work/pgbench.err" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
  # A smoke run may end before a transaction does; its numbers mean nothing.
  [ -n "$tps" ] || [ "$smoke" = "--smoke" ] || {
    cat "$work/pgbench.err" >&2
    echo "postgresql_bench: pgbench $1 at $2 clients failed" >&2
    exit 1
  }
  printf '%.0f' "${tps:-0}"
}
: >"$work/leaf.tsv"
: >"$out_tsv"
for n in $(echo "$in_flight" | tr ',' ' '); do
  tps=$(pgbench_tps "$work/leaf.sql" "$n")
  printf '%s\t%s\n' "$n" "$tps" >>"$work/leaf.tsv"
  printf 'update_returning\t%s\t%s\n' "$n" "$tps" >>"$out_tsv"
done
printf 'nextval\t1\t%s\n' "$(pgbench_tps "$work/nextval.sql" 1)" >>"$out_tsv"

# Column 2 of a hilo_bench TSV (NextRange, 1 collection) at `n` in flight.
next_range() { awk -F'\t' -v n="$2" 'NR > 1 && $1 == n {print $2}' "$1"; }
{
  echo "### NextRange on PostgreSQL (requests/s)"
  echo
  echo "hilo_bench's NextRange on 1 collection (medians, as in the tables above) with"
  echo "every server started with \`--store=postgresql://...\` on a throwaway"
  echo "PostgreSQL 15 on the same machine (\`fsync\` and \`synchronous_commit\` on),"
  echo "beside the SQLite store's run above and beside what Leaf and Tinyid do per"
  echo "request: one \`UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ...\`"
  echo "\`RETURNING max_id\` in autocommit on the same database, driven by \`pgbench\`"
  echo "with as many clients as requests in flight (${pgbench_time} s each)."
  echo
  echo "| in flight | NextRange, SQLite | NextRange, PostgreSQL | UPDATE ... RETURNING (pgbench) | PostgreSQL ÷ UPDATE |"
  echo "|---:|---:|---:|---:|---:|"
  for n in $(echo "$in_flight" | tr ',' ' '); do
    sqlite="–"
    [ -n "$sqlite_tsv" ] && [ -f "$sqlite_tsv" ] && sqlite=$(next_range "$sqlite_tsv" "$n")
    pg=$(next_range "$work/hilo.tsv" "$n")
    leaf=$(awk -F'\t' -v n="$n" '$1 == n {print $2}' "$work/leaf.tsv")
    ratio=$(awk -v a="$pg" -v b="$leaf" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "–" }')
    echo "| $n | ${sqlite:-–} | $pg | $leaf | $ratio |"
  done
  pg64=$(next_range "$work/hilo.tsv" 64)
  leaf64=$(awk -F'\t' '$1 == 64 {print $2}' "$work/leaf.tsv")
  met=$(awk -v a="$pg64" -v b="$leaf64" 'BEGIN { print (b > 0 && a / b >= 3) ? "yes" : "**no**" }')
  echo
  echo "| ratio at 64 in flight | measured | target | met |"
  echo "|---|---:|---:|:---:|"
  echo "| NextRange on PostgreSQL ÷ UPDATE ... RETURNING per request | $(awk -v a="$pg64" -v b="$leaf64" 'BEGIN { printf "%.1f", a / b }') | ≥ 3.0 | $met |"
} >"$out_md"
