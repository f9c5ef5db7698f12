#!/bin/sh
# NextRange against the no-op RPC (the gRPC health Check) on one hilo_server,
# side by side in the same run: h2load on the raw methods, 2 connections x 32
# streams (64 in flight), one load thread, the two calls alternating in short
# rounds so both see the same machine. Prints every round and the medians,
# and fails only if the median NextRange / no-op ratio is below --floor.
#
#   nextrange_vs_noop.sh --server PATH [--rounds N] [--seconds S]
#                        [--floor F] [--server_flags "FLAGS"]
#
# Why h2load and not hilo_bench: the NextRange loss of issue 38 showed with
# h2load and not within hilo_bench's spread. Why a ratio: requests per second
# move with whatever else the machine runs; the ratio of two calls measured
# in alternation on the same server moves much less. Every NextRange must be
# answered OK: h2load counts a gRPC error (HTTP 200, grpc-status in the
# trailers) as a success, so the server's own count of OK NextRanges
# (hilo_requests_total on its metrics port) must cover what h2load sent.
#
# Needs h2load (nghttp2-client), curl and python3:
# scripts/install-deps-bench.sh. Binds 127.0.0.1:0 only; the database lives
# in a temporary directory on $TMPDIR (the disk measured), removed at exit.
set -eu

server=""
rounds=3
seconds=2
floor=0
server_flags=""
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --floor) floor=$2; shift 2 ;;
    --server_flags) server_flags=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "nextrange_vs_noop: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$server" ] || {
  echo "nextrange_vs_noop: --server \"$server\" is not an executable" >&2
  exit 2
}
for tool in h2load curl python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "nextrange_vs_noop: $tool is missing; run scripts/install-deps-bench.sh" >&2
    exit 1
  }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/hilo-nextrange-vs-noop.XXXXXX")
pid=""
cleanup() {
  [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# gRPC frames: NextRangeRequest{collection: "orders"}, and an empty
# HealthCheckRequest (every service).
printf '\000\000\000\000\010\012\006orders' >"$work/next.bin"
printf '\000\000\000\000\000' >"$work/noop.bin"

# Both ports are chosen by the server; it prints them once it serves.
# A new database needs --create_db; builds from before it have no such flag.
create_db=""
if "$server" --help 2>&1 | grep -q -- --create_db; then create_db=--create_db; fi
# shellcheck disable=SC2086  # server_flags is a list of flags
"$server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --db="$work/db/hilo.db" $create_db $server_flags >"$work/server.log" 2>&1 &
pid=$!
port=""
tries=0
while [ -z "$port" ]; do
  port=$(sed -n 's/.*serving node .* on port \([0-9]*\) .*/\1/p' "$work/server.log" 2>/dev/null || true)
  metrics_port=$(sed -n 's/.*metrics port \([0-9]*\).*/\1/p' "$work/server.log" 2>/dev/null || true)
  [ -n "$port" ] && break
  tries=$((tries + 1))
  if [ "$tries" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "nextrange_vs_noop: the server did not start within 10 s:" >&2
    cat "$work/server.log" >&2
    exit 1
  fi
  sleep 0.1
done

# h2load PATH BODY: "<requests/s> <requests succeeded>" of one timed run.
h2() {
  h2load -D "$seconds" -c 2 -m 32 -t 1 -H 'content-type: application/grpc' \
    -H 'te: trailers' -d "$2" "http://127.0.0.1:$port$1" 2>&1 |
    awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($i == "req/s,") r = $(i - 1) }
         /^requests:/ { for (i = 1; i <= NF; i++) if ($i == "succeeded,") s = $(i - 1) }
         END { gsub(",", "", r); print (r == "" ? 0 : r), (s == "" ? 0 : s) }'
}

# The two calls alternate, and which goes first alternates too, so a drift
# of the machine's load during the run falls on both.
sent=0
: >"$work/rounds"
r=1
while [ "$r" -le "$rounds" ]; do
  # Word splitting on purpose: each h2 prints two fields.
  # shellcheck disable=SC2046
  if [ $((r % 2)) -eq 1 ]; then
    set -- $(h2 /hilo.v1.HiLo/NextRange "$work/next.bin") \
      $(h2 /grpc.health.v1.Health/Check "$work/noop.bin")
    next=$1 next_ok=$2 noop=$3
  else
    set -- $(h2 /grpc.health.v1.Health/Check "$work/noop.bin") \
      $(h2 /hilo.v1.HiLo/NextRange "$work/next.bin")
    noop=$1 next=$3 next_ok=$4
  fi
  sent=$((sent + next_ok))
  echo "$r $next $noop" >>"$work/rounds"
  r=$((r + 1))
done

answered=$(curl -s --max-time 5 "http://127.0.0.1:$metrics_port/metrics" |
  awk '/^hilo_requests_total\{/ && /method="NextRange"/ && /code="OK"/ { n += $2 }
       END { printf "%d", n }')

python3 - "$work/rounds" "$floor" "$sent" "$answered" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
floor, sent, answered = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print("round  NextRange/s  no-op/s  NextRange/no-op")
for r, n, o in rows:
    print("%5d  %11.0f  %7.0f  %15.3f" % (r, n, o, n / o if o else 0))
ratios = [n / o if o else 0 for _, n, o in rows]
median = statistics.median(ratios)
print("median: NextRange %.0f/s, no-op %.0f/s, ratio %.3f (rounds %.3f-%.3f); floor %.3f"
      % (statistics.median(r[1] for r in rows), statistics.median(r[2] for r in rows),
         median, min(ratios), max(ratios), floor))
if sent == 0 or answered < sent:
    print("FAIL: h2load saw %d NextRange succeed, the server answered %d OK" % (sent, answered))
    sys.exit(1)
if median < floor:
    print("FAIL: NextRange / no-op %.3f is below the floor %.3f" % (median, floor))
    sys.exit(1)
EOF
