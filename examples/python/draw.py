"""draw.py: N threads take document IDs from one collection for S seconds and
print each on its own line, then the client closes (handing its unused
numbers back) and the program exits 0. The Python branch of scripts/hilo-draw:

    draw.py [--targets=HOST:PORT,...] --collection=NAME --threads=N
            --seconds=S [--rate=R] [--stats [--mark_after=M]]

It keeps drawing through UNAVAILABLE (every target down for a moment) until
S is over. --rate paces each thread to R IDs a second; --stats ends with one
line on stderr, `draw.py: ids=N longest_wait_ms=W calls_waited=C
runway_s=R`: W is the longest an ID took to come (failed tries and the
waits between them included), C the client's calls_waited (the first call
always waits: a new client holds no range), R the collection's runway when
the drawing ended (-1: none). With --mark_after, the line goes on with
` mark_calls_waited=C0 mark_runway_s=R0 after_mark_longest_wait_ms=W1`:
calls_waited and the runway M seconds into the drawing, and the longest wait
since (a test marks just before it breaks something, so that C - C0 and W1
are what the break cost, without the waits of the client's first ranges). Any other error prints one line naming it to stderr and exits 1.
Needs hilo_client (clients/python) and the generated stubs on PYTHONPATH.
"""

import argparse
import sys
import threading
import time

import hilo_client


def main() -> int:
    parser = argparse.ArgumentParser(prog="draw.py")
    parser.add_argument("--targets", default="127.0.0.1:50051",
                        help="hilo servers, comma-separated, in failover "
                             "order")
    parser.add_argument("--collection", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="IDs a second per thread; 0: as fast as it can")
    parser.add_argument("--stats", action="store_true",
                        help="end with the count of IDs and the longest wait "
                             "on stderr")
    parser.add_argument("--mark_after", type=float, default=-1.0,
                        help="with --stats: also report the waits after this "
                             "many seconds of drawing, and calls_waited and "
                             "the runway at that moment")
    args = parser.parse_args()
    if args.threads < 1 or not args.seconds >= 0 or not args.rate >= 0:
        print("draw.py: needs --threads >= 1, --seconds >= 0 and --rate >= 0",
              file=sys.stderr)
        return 2
    try:
        client = hilo_client.Client(args.targets.split(","))
    except ValueError as e:
        print(f"draw.py: {e}", file=sys.stderr)
        return 1
    until = time.monotonic() + args.seconds
    out_lock = threading.Lock()
    errors = []
    counted = {"ids": 0, "longest": 0.0}
    pace = 1.0 / args.rate if args.rate > 0 else 0.0

    def draw() -> None:
        asked = next_at = time.monotonic()
        while not errors and time.monotonic() < until:
            try:
                doc = client.next_document_id(args.collection)
            except hilo_client.HiloError as e:
                if e.code.name == "UNAVAILABLE":
                    time.sleep(0.01)  # a node is down; try again
                    continue
                errors.append(str(e))
                return
            except Exception as e:  # noqa: BLE001 - reported, exit 1
                errors.append(f"{type(e).__name__}: {e}")
                return
            now = time.monotonic()
            with out_lock:
                sys.stdout.write(doc + "\n")
                counted["ids"] += 1
                counted["longest"] = max(counted["longest"], now - asked)
            if pace:
                next_at = max(next_at + pace, now)
                time.sleep(max(0.0, next_at - time.monotonic()))
            asked = time.monotonic()

    workers = [threading.Thread(target=draw) for _ in range(args.threads)]
    for w in workers:
        w.start()
    at_mark = None
    longest_before_mark = 0.0
    if 0 <= args.mark_after < args.seconds:
        time.sleep(args.mark_after)
        at_mark = client.stats()
        with out_lock:
            longest_before_mark = counted["longest"]
            counted["longest"] = 0.0
    for w in workers:
        w.join()
    sys.stdout.flush()
    if errors:
        client.close()
        print(f"draw.py: drawing from {args.collection!r} failed: "
              f"{errors[0]}", file=sys.stderr)
        return 1
    stats = client.stats()
    client.close()
    if args.stats:
        mark = ""
        if at_mark is not None:
            mark = (f" mark_calls_waited={at_mark.calls_waited} "
                    "mark_runway_s="
                    f"{at_mark.runway.get(args.collection, -1.0):.1f} "
                    "after_mark_longest_wait_ms="
                    f"{counted['longest'] * 1000:.1f}")
        longest = max(longest_before_mark, counted["longest"])
        print(f"draw.py: ids={counted['ids']} "
              f"longest_wait_ms={longest * 1000:.1f} "
              f"calls_waited={stats.calls_waited} "
              f"runway_s={stats.runway.get(args.collection, -1.0):.1f}{mark}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
