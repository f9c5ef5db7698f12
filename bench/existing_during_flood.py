#!/usr/bin/python3
"""NextRange on existing collections while another tenant floods creations
(issue 36 item 3: "NextRange on existing collections keeps >= 90 % of its
throughput"), measured so that a machine's drift is not read as a result.

  bench/existing_during_flood.py [--rounds N] [--seconds S]
                                 [--server_flags FLAGS] HILO_SERVER

One hilo_server, set up as tests/abuse/access_abuse_test.py's
tenant_creation_flood phase "existing" sets it up: a fresh SQLite database
with --sync=normal, --max_collection_creations_per_minute=50, an
authorization policy granting token:app the names app* with a budget of
100,000 creations a minute and token:reader the names existing-*, refusals
audited to a file. The reader's load is h2load on NextRange("existing-0")
with its token, 2 connections x 16 streams (32 in flight), one thread, for
S seconds. In each round it runs three times, once per condition:

  flood    token:app asks NextRange for new names app-... (allowed by the
           policy), 32 calls in flight from one Python client, as fast as
           the server answers: after the window's 50 creations a minute
           every one is refused at the node's creation window.
  refused  the same client and load, names denied-...: the policy refuses
           every one before any store (the test's baseline: the same
           client load on the machine, no creation reaching the server's
           store or window).
  none     no flood at all.

The conditions' order turns by one every round, so each takes each place
equally often. Prints every run (reader NextRange/s, h2load's mean time
per request, the flood's calls a second and their outcomes, the server's
CPU, the flooding client's (this process's) and h2load's over the run), then
the medians [min-max] of each condition and of the per-round
quotients flood / refused (what the server pays for creations refused at
a full window beyond what it pays for any refused call: the test's
figure), flood / none and refused / none (what the whole flood costs the
reader: on a machine of few cores mostly the flooding client's own CPU,
which the printed CPU times show). Checks that the
server answered OK every NextRange h2load counted as done (h2load counts a
gRPC error as a success; the server's hilo_requests_total must cover the
reader's and the flood's OKs) and exits 1 if not.

Run it at real-time priority (chrt -r 20 ...: the server, h2load and the
flooder inherit it) on a machine others use, or the builds beside decide.
Needs h2load (scripts/install-deps-bench.sh) and Debian's python3-grpcio.
"""
import argparse
import collections
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

NEXT = "/hilo.v1.HiLo/NextRange"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CONDITIONS = ("flood", "refused", "none")
PREFIX = {"flood": "app", "refused": "denied"}


def next_range_request(collection):
    """NextRangeRequest{collection} (field 1, a short string)."""
    name = collection.encode()
    return b"\x0a" + bytes([len(name)]) + name


def grpc_frame(message):
    return b"\x00" + len(message).to_bytes(4, "big") + message


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children_cpu_seconds():
    """User and system CPU of the children waited for (h2load's runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def next_range_ok(metrics_port):
    """The server's count of NextRange calls answered OK."""
    text = urllib.request.urlopen(
        f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("hilo_requests_total{")
               and 'method="NextRange"' in line and 'code="OK"' in line)


def h2load(port, token, body, seconds):
    """(requests/s, requests done, mean ms per request) of one timed run."""
    out = subprocess.run(
        ["h2load", "-D", str(seconds), "-c", "2", "-m", "16", "-t", "1",
         "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-H", f"authorization: Bearer {token}",
         "-d", body, f"http://127.0.0.1:{port}{NEXT}"],
        capture_output=True, text=True, timeout=seconds + 30).stdout
    rate = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded",
                     out)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out)
    mean_ms = None
    if mean:
        mean_ms = float(mean.group(1)) * {"us": 1e-3, "ms": 1.0,
                                          "s": 1e3}[mean.group(2)]
    return (float(rate.group(1)) if rate else 0.0,
            int(done.group(1)) if done else 0, mean_ms)


def flood(port, token, prefix, stop, outcomes):
    """NextRange for new names `prefix`-N, 32 in flight, until `stop`."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.unary_unary(NEXT, request_serializer=None,
                              response_deserializer=None)
        metadata = [("authorization", "Bearer " + token)]
        i = 0
        while not stop.is_set():
            futures = [call.future(next_range_request(f"{prefix}-{i + k:08d}"),
                                   timeout=10, metadata=metadata)
                       for k in range(32)]
            i += 32
            for f in futures:
                error = f.exception()
                outcomes[error.code().name if error else "OK"] += 1


def spread(values, fmt):
    return (f"{fmt % statistics.median(values)} "
            f"[{fmt % min(values)}-{fmt % max(values)}]")


def start_server(binary, work, tokens, server_flags):
    with open(f"{work}/policy.textproto", "w") as f:
        f.write('grant { identity: "token:app" collections: "app*" '
                'collection_creations_per_minute: 100000 }\n'
                'grant { identity: "token:reader" collections: "existing-*" }\n')
    with open(f"{work}/tokens", "w") as f:
        f.writelines(f"{name} {token}\n" for name, token in tokens.items())
    log = open(f"{work}/server.log", "w")
    proc = subprocess.Popen(
        [binary, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
         f"--db={work}/db/hilo.db", "--create_db", "--sync=normal",
         "--max_collection_creations_per_minute=50",
         f"--authz_policy={work}/policy.textproto",
         f"--authz_tokens={work}/tokens", f"--audit_log={work}/audit.log"]
        + server_flags.split(), stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        match = re.search(r" on port (\d+) .*metrics port (\d+)",
                          open(f"{work}/server.log").read())
        if match:
            return proc, int(match.group(1)), int(match.group(2))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit("existing_during_flood: the server did not start:\n"
             + open(f"{work}/server.log").read())


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--server_flags", default="")
    ap.add_argument("binary", metavar="HILO_SERVER")
    args = ap.parse_args()
    if shutil.which("h2load") is None:
        sys.exit("existing_during_flood: h2load is missing; "
                 "run scripts/install-deps-bench.sh")
    work = tempfile.mkdtemp(prefix="hilo-existing-during-flood.")
    tokens = {name: os.urandom(24).hex() for name in ("app", "reader")}
    proc = None
    try:
        proc, port, metrics_port = start_server(args.binary, work, tokens,
                                                args.server_flags)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            call = ch.unary_unary(NEXT, request_serializer=None,
                                  response_deserializer=None)
            for i in range(8):
                call(next_range_request(f"existing-{i}"), timeout=5,
                     metadata=[("authorization", "Bearer " + tokens["reader"])])
        body = f"{work}/next.bin"
        open(body, "wb").write(grpc_frame(next_range_request("existing-0")))
        ok_before = next_range_ok(metrics_port)
        reader_done, flood_ok = 0, 0
        results = {c: [] for c in CONDITIONS}
        for r in range(args.rounds):
            order = CONDITIONS[r % 3:] + CONDITIONS[:r % 3]
            for condition in order:
                stop = threading.Event()
                outcomes = collections.Counter()
                flooder = None
                if condition in PREFIX:
                    flooder = threading.Thread(target=flood, args=(
                        port, tokens["app"], f"{PREFIX[condition]}-{r}", stop,
                        outcomes))
                    flooder.start()
                    time.sleep(0.5)  # the flood is running when h2load starts
                counted = sum(outcomes.values())
                cpu = cpu_seconds(proc.pid)
                client_cpu = time.process_time()
                h2load_cpu = children_cpu_seconds()
                started = time.monotonic()
                rate, done, mean_ms = h2load(port, tokens["reader"], body,
                                             args.seconds)
                took = time.monotonic() - started
                server_cpu = cpu_seconds(proc.pid) - cpu
                client_cpu = time.process_time() - client_cpu
                h2load_cpu = children_cpu_seconds() - h2load_cpu
                flood_per_s = (sum(outcomes.values()) - counted) / took
                stop.set()
                if flooder:
                    flooder.join(timeout=30)
                reader_done += done
                flood_ok += outcomes["OK"]
                results[condition].append((rate, mean_ms, flood_per_s,
                                           server_cpu, client_cpu, h2load_cpu))
                print(f"round {r + 1:2d} {condition:8s} reader NextRange "
                      f"{rate:8.0f}/s  mean {mean_ms or 0:6.2f} ms  flood "
                      f"{flood_per_s:7.0f}/s {dict(outcomes)}  CPU s: server "
                      f"{server_cpu:5.2f}, flooding client {client_cpu:5.2f}, "
                      f"h2load {h2load_cpu:5.2f}",
                      flush=True)
        answered = next_range_ok(metrics_port) - ok_before
        print("medians [min-max]")
        for c in CONDITIONS:
            rate, mean_ms, flood_per_s, server_cpu, client_cpu, h2_cpu = zip(
                *results[c])
            print(f"{c:8s} reader NextRange/s {spread(rate, '%.0f')}  mean ms "
                  f"{spread([m or 0 for m in mean_ms], '%.2f')}  flood/s "
                  f"{spread(flood_per_s, '%.0f')}  CPU s: server "
                  f"{spread(server_cpu, '%.2f')}, flooding client "
                  f"{spread(client_cpu, '%.2f')}, h2load "
                  f"{spread(h2_cpu, '%.2f')}")
        for a, b in (("flood", "refused"), ("flood", "none"),
                     ("refused", "none")):
            q = [x[0] / y[0] for x, y in zip(results[a], results[b]) if y[0]]
            print(f"{a} / {b}, per round: reader NextRange/s "
                  f"{spread(q, '%.3f')}  (below 0.90 in {sum(v < 0.9 for v in q)}"
                  f" of {len(q)} rounds)")
        if answered < reader_done + flood_ok:
            print(f"FAIL: h2load counted {reader_done} NextRange done and the "
                  f"flood {flood_ok} OK; the server answered {answered:.0f} OK")
            sys.exit(1)
        print(f"every NextRange answered OK ({answered:.0f} by the server's "
              f"count; h2load {reader_done}, the flood's creations {flood_ok})")
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
