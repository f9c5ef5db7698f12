#!/bin/sh
# Installs what the benchmarks need (bench/, tests labelled "bench"), and
# nothing that is already there. Safe to run again. Uses sudo for apt when
# not run as root.
#   - libbenchmark-dev: Google Benchmark, for client_benchmark
#   - uuid-dev: libuuid, the UUID v4 baseline in client_benchmark
#   - gnuplot-nox: draws the throughput plot (pngcairo) in
#     bench/run_benchmarks.sh
#   - util-linux: lscpu and findmnt, for the machine description
#   - redis-server (with redis-tools: redis-benchmark, redis-cli): the Redis
#     INCR/INCRBY peers in bench/peers_bench.sh
#   - nghttp2-client: h2load, the HTTP/2 load generator of
#     bench/nextrange_vs_noop.sh (NextRange beside the no-op RPC)
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

apt_install_missing install-deps-bench libbenchmark-dev uuid-dev gnuplot-nox util-linux \
  redis-server nghttp2-client
