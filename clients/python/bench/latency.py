"""Times every call of the Python client, not their mean: next_id and
next_document_id on 1 and 2 threads (under the GIL) flat out, with prefetch
on, against one server (bench/client_latency.sh puts a proxy 2 ms away in
front of a real hilo_server), each for SECONDS from a cold start, refills
included. Prints one RESULT line per run, the columns every language's
latency benchmark prints (times in nanoseconds). Not a test: it asserts
nothing about speed.

    PYTHONPATH=GEN/python:clients/python /usr/bin/python3 \
        clients/python/bench/latency.py HOST:PORT [SECONDS]
"""

import sys
import threading
import time

from hilo_client import Client

FINE_NANOS = 10_000  # exact to the nanosecond below this; slower kept whole


class Recorder:
    """Call times of one thread; a percentile is the sample of rank
    floor(q * count), as in bench/latency_histogram.h."""

    def __init__(self):
        self.fine = [0] * FINE_NANOS
        self.slow = []
        self.count = 0
        self.max = 0
        self.slow_1us = 0

    def merge(self, other):
        for ns, n in enumerate(other.fine):
            self.fine[ns] += n
        self.slow += other.slow
        self.count += other.count
        self.max = max(self.max, other.max)
        self.slow_1us += other.slow_1us

    def percentile(self, q):
        if self.count == 0:
            return 0
        rank = min(self.count - 1, int(q * self.count))
        seen = 0
        for ns, n in enumerate(self.fine):
            seen += n
            if seen > rank:
                return ns
        return sorted(self.slow)[rank - seen]


def draw(call, end, recorder):
    clock = time.perf_counter_ns
    fine, slow = recorder.fine, recorder.slow
    count = slow_1us = longest = 0
    now = clock()
    while now < end:
        start = now
        call()
        now = clock()
        ns = now - start
        count += 1
        if ns < FINE_NANOS:
            fine[ns] += 1
        else:
            slow.append(ns)
        if ns >= 1000:
            slow_1us += 1
            longest = max(longest, ns)
    recorder.count, recorder.slow_1us = count, slow_1us
    recorder.max = max([longest] + [ns for ns, n in enumerate(fine) if n])


def run(target, call_name, threads, seconds):
    client = Client(target)
    collection = f"latency-py-{call_name}-{threads}-{time.time_ns()}"
    if call_name == "NextId":
        def call():
            client.next_id(collection)
    else:
        def call():
            client.next_document_id(collection)
    recorders = [Recorder() for _ in range(threads)]
    begin = time.perf_counter_ns()
    end = begin + int(seconds * 1e9)
    workers = [threading.Thread(target=draw, args=(call, end, r))
               for r in recorders]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = (time.perf_counter_ns() - begin) / 1e9
    waited = client.stats().calls_waited
    client.close()
    total = Recorder()
    for r in recorders:
        total.merge(r)
    p = total.percentile
    print(f"RESULT lang=Python call={call_name} prefetch=on threads={threads} "
          f"calls={total.count} waited={waited} p50={p(0.5)} p99={p(0.99)} "
          f"p999={p(0.999)} p9999={p(0.9999)} max={total.max} "
          f"slow_1us={total.slow_1us} seconds={elapsed:.3f}", flush=True)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    seconds = float(sys.argv[2]) if len(sys.argv) == 3 else 3.0
    for call_name in ("NextId", "NextDocumentId"):
        for threads in (1, 2):
            run(sys.argv[1], call_name, threads, seconds)


if __name__ == "__main__":
    main()
