#!/bin/bash
# Every client's call latency with its server 2 ms away: P50 to P99.99 and
# the maximum time of one NextId and one NextDocumentId call, on 1 and 2
# threads, prefetch on, refills included, and the calls that waited for a
# range (issue 38). Runs each language's latency benchmark ROUNDS times,
# interleaved (C++, Go, Java, Node, Python, then again), and writes the runs
# and a table of their medians and ranges. Not a test: it asserts nothing
# about speed.
#
#   bench/client_latency.sh BUILD_DIR OUT_DIR [ROUNDS=3] [SECONDS=3] [LANGS]
#
# BUILD_DIR is a CMake build with hilo_server, hilo_bench and
# hilo_delaying_proxy built and the lang.gen_stubs test run (its stubs in
# BUILD_DIR/tests/languages/gen). LANGS is a comma-separated subset of
# c++,go,java,node,python (default: all). C++ is hilo_bench's latency
# section (its own server and in-process proxy); the others draw from one
# hilo_server through one hilo_delaying_proxy --delay=2ms, started here.
# Writes OUT_DIR/runs.txt (one RESULT line per run, times in ns) and
# OUT_DIR/client_latency.md (bench/client_latency_table.py).
set -eu
if [ $# -lt 2 ] || [ $# -gt 5 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR [ROUNDS] [SECONDS] [LANGS]" >&2
  exit 2
fi
ROOT=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
BUILD=$(CDPATH='' cd -- "$1" && pwd)
mkdir -p "$2"
OUT=$(CDPATH='' cd -- "$2" && pwd)
ROUNDS=${3:-3}
SECONDS_EACH=${4:-3}
LANGS=",${5:-c++,go,java,node,python},"
GEN=$BUILD/tests/languages/gen
SERVER=$BUILD/service/hilo_server
has() { case "$LANGS" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# Inside with_server.sh (HILO_TARGET set): start the proxy, run the rounds.
if [ "${HILO_LATENCY_INNER:-}" = 1 ]; then
  "$BUILD/bench/hilo_delaying_proxy" --upstream="$HILO_TARGET" --delay=2ms \
    >"$OUT/proxy.out" 2>"$OUT/proxy.log" &
  proxy_pid=$!
  trap 'kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$OUT/proxy.out" && break
    sleep 0.1
  done
  target=$(sed -n 's/^listening on //p' "$OUT/proxy.out")
  [ -n "$target" ] || { echo "$0: the proxy did not start" >&2; exit 1; }
  CP=""
  has java && CP=$("$ROOT/examples/java/classpath.sh")
  for round in $(seq 1 "$ROUNDS"); do
    echo "$0: round $round of $ROUNDS, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    {
      if has c++; then
        for threads in 1 2; do
          "$BUILD/bench/hilo_bench" --sections=latency \
            --latency_threads="$threads" --latency_duration="${SECONDS_EACH}s" \
            --out_md=/dev/null 2>&1 >/dev/null | grep '^RESULT ' || true
        done
      fi
      if has go; then
        HILO_LATENCY_TARGET=$target HILO_LATENCY_SECONDS=$SECONDS_EACH \
          "$OUT/go/latency.test" -test.run '^$' -test.bench LatencyTail \
          -test.benchtime 1x | grep '^RESULT ' || true
      fi
      if has java; then
        java -cp "$OUT/java/bench:$OUT/java/client/hilo-client.jar:$CP" \
          LatencyBench "$target" "$SECONDS_EACH" | grep '^RESULT ' || true
      fi
      if has node; then
        HILO_NODE_PKG=$OUT/node/package node "$ROOT/clients/node/bench/latency.mjs" \
          "$target" "$SECONDS_EACH" | grep '^RESULT ' || true
      fi
      if has python; then
        PYTHONPATH=$GEN/python:$ROOT/clients/python /usr/bin/python3 \
          "$ROOT/clients/python/bench/latency.py" "$target" "$SECONDS_EACH" |
          grep '^RESULT ' || true
      fi
    } | sed "s/^RESULT /RESULT round=$round load=$(cut -d' ' -f1 /proc/loadavg) /" | tee -a "$OUT/runs.txt" >&2
  done
  exit 0
fi

# Build what each language needs, once, outside the timed rounds.
[ -d "$GEN/python" ] || { echo "$0: no stubs in $GEN; run ctest -R '^lang.gen_stubs\$'" >&2; exit 2; }
if has go; then
  mkdir -p "$OUT/go"
  # shellcheck source=clients/go/goenv.sh
  . "$ROOT/clients/go/goenv.sh"
  hilo_go_env "$ROOT" "$GEN" "$OUT/go"
  go test -c -o "$OUT/go/latency.test" github.com/hilo-id/hilo/clients/go
fi
if has java; then
  "$ROOT/clients/java/build.sh" "$GEN" "$OUT/java/client" >&2
  rm -rf "$OUT/java/bench" && mkdir -p "$OUT/java/bench"
  javac --release 17 -Xlint:all -Werror -d "$OUT/java/bench" \
    -cp "$OUT/java/client/hilo-client.jar:$("$ROOT/examples/java/classpath.sh")" \
    "$ROOT/clients/java/bench/LatencyBench.java"
fi
has node && "$ROOT/clients/node/build.sh" "$OUT/node" >&2
: >"$OUT/runs.txt"
HILO_LATENCY_INNER=1 "$ROOT/testing/with_server.sh" "$SERVER" \
  "$0" "$@"
/usr/bin/python3 "$ROOT/bench/client_latency_table.py" "$OUT/runs.txt" \
  >"$OUT/client_latency.md"
echo "$0: wrote $OUT/runs.txt and $OUT/client_latency.md" >&2
