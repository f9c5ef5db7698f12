#!/usr/bin/env python3
"""What a flood of new collections costs NextRange on existing ones, on a
PostgreSQL store shared by one or two servers (issue 36 item 5: the count
of collections for the whole store is locked by every batch that creates a
row; a batch on existing rows never touches it).

  bench/creation_interference.py HILO_SERVER [HILO_SERVER ...]

For each binary and each fleet size (1 and 2 servers on a PostgreSQL
cluster of its own, testing/temp_postgres.sh), h2load asks NextRange of an
existing collection with 32 streams per server, alternately alone and
while a Python flooder creates new names (32 calls in flight per server),
in rounds of --seconds. Prints the existing collection's NextRange a second
(all servers together) with h2load's mean and max time per request, and
the creations a second. Needs h2load (nghttp2-client) and Debian's
python3-grpcio; the numbers measure the machine too: compare binaries
within one run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "abuse"))
import abuse_lib as lib  # noqa: E402


def closed_loop(ch, names, stop, in_flight, latencies, counts, key):
    """`in_flight` NextRange calls at a time over `names` until `stop`."""
    call = ch.unary_unary(lib.NEXT, request_serializer=None,
                          response_deserializer=None)
    i = 0
    while not stop.is_set():
        batch = []
        for _ in range(in_flight):
            batch.append((time.monotonic(), call.future(
                lib.next_range_request(names(i)), timeout=10)))
            i += 1
        for started, future in batch:
            try:
                future.result()
                latencies.append(time.monotonic() - started)
                counts[key] += 1
            except grpc.RpcError:
                counts[key + "_failed"] += 1


def h2load(port, body_file, seconds):
    """h2load's NextRange of collection old-000 for `seconds`, 32 streams
    on one connection: (requests a second, mean ms, max ms)."""
    out = subprocess.run(
        ["h2load", "-D", str(int(seconds)), "-c", "1", "-m", "32", "-t", "1",
         "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-d", body_file, f"http://127.0.0.1:{port}{lib.NEXT}"],
        capture_output=True, text=True).stdout
    rate = re.search(r"finished in .*?, ([0-9.]+) req/s", out)
    times = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)

    def ms(text):
        value = float(re.match(r"[0-9.]+", text).group(0))
        return value / 1000 if text.endswith("us") else (
            value * 1000 if text.endswith("s") and not text.endswith("ms")
            else value)
    return (float(rate.group(1)) if rate else 0.0,
            ms(times.group(3)) if times else None,
            ms(times.group(2)) if times else None)


def one_round(servers, flood, seconds, round_id, body_file):
    stop = threading.Event()
    counts = {"new": 0, "new_failed": 0}
    threads, channels = [], []
    if flood:
        for n, s in enumerate(servers):
            ch = s.endpoint.channel()
            channels.append(ch)
            threads.append(threading.Thread(target=closed_loop, args=(
                ch, lambda i, n=n: f"new-{round_id}-{n}-{i:08d}", stop, 32,
                [], counts, "new")))
    for t in threads:
        t.start()
    loads = [None] * len(servers)

    def load(n):
        loads[n] = h2load(servers[n].port, body_file, seconds)
    runners = [threading.Thread(target=load, args=(n,))
               for n in range(len(servers))]
    started = time.monotonic()
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    took = time.monotonic() - started
    stop.set()
    for t in threads:
        t.join()
    for ch in channels:
        ch.close()
    return {"old_per_s": round(sum(x[0] for x in loads)),
            "mean_ms": [x[1] for x in loads], "max_ms": [x[2] for x in loads],
            "new_per_s": round(counts["new"] / took),
            "failed": counts["new_failed"]}


def run(binary, fleet, rounds, seconds):
    results = {False: [], True: []}
    with lib.TempPostgres() as uri:
        servers = [lib.Server(binary, f"--store={uri}", f"--node_tag={tag}",
                              "--max_collection_creations_per_minute=0",
                              "--max_collections=10000000")
                   for tag in "AB"[:fleet]]
        try:
            ch = servers[0].endpoint.channel()
            for i in range(100):
                lib.next_range(ch, f"old-{i:03d}", timeout=10)
            ch.close()
            body = os.path.join(servers[0].dir.name, "next.bin")
            with open(body, "wb") as f:
                f.write(lib.grpc_frame(lib.next_range_request("old-000")))
            for r in range(rounds):
                # Which goes first alternates, so a drift of the machine's
                # load falls on both.
                for flood in ((False, True) if r % 2 == 0 else (True, False)):
                    results[flood].append(
                        one_round(servers, flood, seconds, r, body))
        finally:
            for s in servers:
                s.close()
    for flood in (False, True):
        rows = results[flood]
        print(f"{os.path.basename(os.path.dirname(os.path.dirname(binary)))}"
              f" {binary} fleet={fleet} flood={flood}: "
              f"old/s {[r['old_per_s'] for r in rows]} median "
              f"{statistics.median(r['old_per_s'] for r in rows)}"
              f" mean_ms {[r['mean_ms'] for r in rows]}"
              f" max_ms {[r['max_ms'] for r in rows]}"
              f" new/s {[r['new_per_s'] for r in rows]}"
              f" failed {[r['failed'] for r in rows]}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    for fleet in (1, 2):
        for binary in args.binaries:
            run(binary, fleet, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
