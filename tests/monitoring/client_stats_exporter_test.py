#!/usr/bin/python3
"""monitoring.client_stats_exporter: examples/cpp/client_stats_exporter,
the README's way to export hilo::ClientStats, against a real hilo_server.

Run 1: targets a dead port first, then the server; draws 40 IDs without
prefetching (a range of 32, then a bigger one) and hands the rest back.
Its /metrics must say exactly: 2 ranges fetched, 2 calls waited, 0
prefetched, 1 failover (the dead port, once; the server is preferred
after), 1 return applied, no errors. Run 2: only the dead port; one draw
fails. Its /metrics must say 1 UNAVAILABLE error and nothing fetched. Each
scrape must pass `promtool check metrics`.

  client_stats_exporter_test.py HILO_SERVER CLIENT_STATS_EXPORTER
"""

import os
import re
import subprocess
import sys
import time
import urllib.request

from monitoring_lib import Failure, Test, read, wait_for

TEST = Test("monitoring.client_stats_exporter")
# Nothing listens on port 1 of the loopback: connections are refused.
DEAD_TARGET = "127.0.0.1:1"


def scrape(exporter_bin, work, name, targets, ids):
    """Runs the exporter, returns {series: value} of its hilo_client_
    metrics, and stops it (which must exit 0)."""
    output = os.path.join(work, f"{name}.log")
    exporter = TEST.start(
        [exporter_bin, f"--targets={','.join(targets)}", f"--ids={ids}",
         "--prefetch_at=0", "--collection=orders",
         "--metrics_listen=127.0.0.1:0"], output)
    port = wait_for(f"{name}: serving metrics",
                    lambda: re.search(r"serving metrics on port (\d+)",
                                      read(output)),
                    time.monotonic() + 30, exporter, output).group(1)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as reply:
        text = reply.read().decode()
    check = subprocess.run(["promtool", "check", "metrics"], input=text,
                           capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise Failure(f"{name}: promtool check metrics: {check.stdout}"
                      f"{check.stderr}")
    exporter.terminate()
    if exporter.wait(timeout=10) != 0:
        raise Failure(f"{name}: exited {exporter.returncode}: {read(output)}")
    values = {}
    for line in text.splitlines():
        if line.startswith("hilo_client_"):
            series, value = line.rsplit(" ", 1)
            values[series] = float(value)
    return values


def expect(name, got, want):
    if got != want:
        raise Failure(f"{name}: the exporter's metrics are\n  {got}\n"
                      f"expected\n  {want}")
    TEST.log(f"ok: {name}: {want}")


def check(server_bin, exporter_bin, work):
    grpc_port, _ = TEST.start_hilo_server(server_bin, work,
                                          "--metrics_listen=")
    server = f"127.0.0.1:{grpc_port}"
    expect("failover, fetches and a return",
           scrape(exporter_bin, work, "run1", [DEAD_TARGET, server], 40),
           {"hilo_client_calls_waited_total": 2,
            "hilo_client_ranges_fetched_total": 2,
            "hilo_client_ranges_prefetched_total": 0,
            "hilo_client_failovers_total": 1,
            'hilo_client_returns_total{result="applied"}': 1,
            'hilo_client_returns_total{result="refused"}': 0,
            'hilo_client_returns_total{result="failed"}': 0})
    expect("no server",
           scrape(exporter_bin, work, "run2", [DEAD_TARGET], 1),
           {"hilo_client_calls_waited_total": 1,
            "hilo_client_ranges_fetched_total": 0,
            "hilo_client_ranges_prefetched_total": 0,
            "hilo_client_failovers_total": 0,
            'hilo_client_returns_total{result="applied"}': 0,
            'hilo_client_returns_total{result="refused"}': 0,
            'hilo_client_returns_total{result="failed"}': 0,
            'hilo_client_errors_total{code="UNAVAILABLE"}': 1})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(TEST.run(lambda work: check(*sys.argv[1:], work)))
