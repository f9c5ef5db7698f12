#!/usr/bin/python3
"""Compares hilo_server builds side by side: NextRange and the no-op RPC.

  bench/compare_builds.py [--rounds N] [--seconds S] [--server_flags FLAGS]
                          [--connections C] [--streams M]
                          LABEL=HILO_SERVER [LABEL=HILO_SERVER ...]

Starts every build once (a fresh SQLite database each, in a temporary
directory on $TMPDIR), then runs ROUNDS rounds; in each round every build in
turn gets h2load on NextRange("orders") for S seconds and then on the gRPC
health Check (the no-op) for S seconds, C connections x M streams (by
default 2 x 32: 64 in flight), one load thread. So the builds are measured interleaved, under the
same load, and a machine that gets busier or quieter during the run moves
all of them. Every other round runs them in reverse order (A B, B A, ...):
on a 2-core machine the build measured second in a round lost 1-3 % against
the same build measured first (2026-12-04), which a fixed order would have
charged to one of them. Prints each run (requests/s and the server's CPU
per request, utime + stime from /proc, and its quotient NextRange / no-op),
each build's medians with their [min-max], and for each build after the
first the median and spread of its per-round quotient against the first:
NextRange/s and NextRange / no-op.

Read the quotients, not the requests/s: on a shared machine those move 2x
between rounds. Needs h2load (scripts/install-deps-bench.sh). Servers bind
127.0.0.1 on free ports; everything is removed at exit.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NEXT_RANGE = b"\x00\x00\x00\x00\x08\x0a\x06orders"  # collection: "orders"
NO_OP = b"\x00\x00\x00\x00\x00"  # an empty HealthCheckRequest
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def create_db_flag(binary):
    """["--create_db"] if `binary` needs it to make a new database; builds
    from before the flag have none and make one without it."""
    shown = subprocess.run([binary, "--help"], capture_output=True, text=True,
                           timeout=30)
    return ["--create_db"] if "--create_db" in shown.stdout + shown.stderr else []

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def h2load(port, pid, path, body, seconds, connections, streams):
    """(requests/s, server CPU µs per request) of one timed run."""
    before = cpu_seconds(pid)
    out = subprocess.run(
        ["h2load", "-D", str(seconds), "-c", str(connections),
         "-m", str(streams), "-t", "1",
         "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-d", body, f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, timeout=seconds + 30).stdout
    after = cpu_seconds(pid)
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    n = int(done.group(1)) if done else 0
    return (float(rate.group(1)) if rate else 0.0,
            (after - before) / n * 1e6 if n else 0.0)


def spread(values, fmt):
    return f"{fmt % statistics.median(values)} [{fmt % min(values)}-{fmt % max(values)}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--server_flags", default="")
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--streams", type=int, default=32,
                    help="requests in flight on each connection")
    ap.add_argument("builds", nargs="+", metavar="LABEL=HILO_SERVER")
    args = ap.parse_args()
    if shutil.which("h2load") is None:
        sys.exit("compare_builds: h2load is missing; run scripts/install-deps-bench.sh")
    work = tempfile.mkdtemp(prefix="hilo-compare-builds.")
    servers = []
    try:
        next_body, noop_body = f"{work}/next.bin", f"{work}/noop.bin"
        open(next_body, "wb").write(NEXT_RANGE)
        open(noop_body, "wb").write(NO_OP)
        for i, build in enumerate(args.builds):
            label, binary = build.split("=", 1)
            port = free_port()
            log = open(f"{work}/{i}.log", "w")
            proc = subprocess.Popen(
                [binary, f"--listen=127.0.0.1:{port}", f"--db={work}/{i}/hilo.db",
                 "--metrics_listen="] + create_db_flag(binary)
                + args.server_flags.split(),
                stdout=log, stderr=subprocess.STDOUT)
            servers.append((label, port, proc))
        time.sleep(1.5)
        for label, _, proc in servers:
            if proc.poll() is not None:
                sys.exit(f"compare_builds: {label} exited at start; see its log")
        results = {label: [] for label, _, _ in servers}
        for r in range(1, args.rounds + 1):
            for label, port, proc in servers if r % 2 else servers[::-1]:
                load = (args.seconds, args.connections, args.streams)
                n, n_cpu = h2load(port, proc.pid, "/hilo.v1.HiLo/NextRange", next_body, *load)
                o, o_cpu = h2load(port, proc.pid, "/grpc.health.v1.Health/Check", noop_body, *load)
                ratio = n / o if o else 0.0
                cpu_ratio = n_cpu / o_cpu if o_cpu else 0.0
                results[label].append((n, o, ratio, n_cpu, o_cpu, cpu_ratio))
                print(f"round {r} {label:10s} NextRange {n:8.0f}/s  no-op {o:8.0f}/s  "
                      f"ratio {ratio:.3f}  server CPU {n_cpu:5.1f} / {o_cpu:5.1f} us "
                      f"= {cpu_ratio:.2f}", flush=True)
        print("medians [min-max]")
        for label, rows in results.items():
            n, o, ratio, n_cpu, o_cpu, cpu_ratio = zip(*rows)
            print(f"{label:10s} NextRange/s {spread(n, '%.0f')}  no-op/s {spread(o, '%.0f')}  "
                  f"ratio {spread(ratio, '%.3f')}  server CPU us per NextRange "
                  f"{spread(n_cpu, '%.1f')}, per no-op {spread(o_cpu, '%.1f')}, "
                  f"NextRange/no-op {spread(cpu_ratio, '%.2f')}")
        first = servers[0][0]
        for label in list(results)[1:]:
            pairs = list(zip(results[first], results[label]))
            rate = [b[0] / a[0] for a, b in pairs if a[0]]
            ratio = [b[2] / a[2] for a, b in pairs if a[2]]
            if rate and ratio:
                print(f"{label} / {first}, per round: NextRange/s {spread(rate, '%.3f')}  "
                      f"NextRange/no-op {spread(ratio, '%.3f')}")
    finally:
        for _, _, proc in servers:
            proc.terminate()
        for _, _, proc in servers:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
