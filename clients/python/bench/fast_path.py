"""The Python client's fast path against what a Python program would use
instead, on 1 and 2 threads: Client.next_id against next() on a shared
itertools.count(), Client.next_document_id against str(uuid.uuid4()). Each
case is warmed up, then run ROUNDS times; a round is OPS calls on each
thread, and its figure is the round's wall time divided by every thread's
calls together (as Go's -cpu 2 reports it). Prints each case's median and
range over the rounds, then the ratios of the medians. Prefetch is on (the
default), refills included. Not a test: it asserts nothing about speed.

    PYTHONPATH=GEN/python:clients/python /usr/bin/python3 \\
        clients/python/bench/fast_path.py HOST:PORT [ROUNDS] [OPS]
"""

import itertools
import statistics
import sys
import threading
import time
import uuid

from hilo_client import Client


def time_round(call, threads, ops):
    """Nanoseconds per call of all `threads` together, each making `ops`
    calls; the threads start together."""
    start = threading.Barrier(threads + 1)

    def work():
        start.wait()
        for _ in range(ops):
            call()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    begin = time.perf_counter_ns()
    for w in workers:
        w.join()
    return (time.perf_counter_ns() - begin) / (threads * ops)


def main():
    if len(sys.argv) not in (2, 3, 4):
        sys.exit(__doc__)
    rounds = int(sys.argv[2]) if len(sys.argv) >= 3 else 7
    ops = int(sys.argv[3]) if len(sys.argv) == 4 else 200_000
    client = Client(sys.argv[1])
    name = f"fast-path-py-{time.time_ns()}"
    counter = itertools.count(1)
    cases = {
        "next(itertools.count())": lambda: next(counter),
        "Client.next_id": lambda: client.next_id(name),
        "str(uuid.uuid4())": lambda: str(uuid.uuid4()),
        "Client.next_document_id": lambda: client.next_document_id(name),
    }
    medians = {}
    for threads in (1, 2):
        for case, call in cases.items():
            time_round(call, threads, ops)  # warm-up; ranges grow
            figures = sorted(time_round(call, threads, ops)
                             for _ in range(rounds))
            medians[case, threads] = statistics.median(figures)
            print(f"{case:26} threads={threads} "
                  f"{medians[case, threads]:8.1f} ns/op "
                  f"(min {figures[0]:.1f}, max {figures[-1]:.1f}, "
                  f"{rounds} rounds of {ops} per thread)", flush=True)
    for threads in (1, 2):
        ids = (medians["Client.next_id", threads]
               / medians["next(itertools.count())", threads])
        documents = (medians["Client.next_document_id", threads]
                     / medians["str(uuid.uuid4())", threads])
        print(f"threads={threads}: next_id / itertools.count {ids:.2f}x, "
              f"next_document_id / uuid4 {documents:.2f}x")
    stats = client.stats()
    print(f"ranges fetched {stats.ranges_fetched}, prefetched "
          f"{stats.ranges_prefetched}, calls that waited {stats.calls_waited}")
    client.close()


if __name__ == "__main__":
    main()
