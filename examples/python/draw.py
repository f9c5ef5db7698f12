"""draw.py: N threads take document IDs from one collection for S seconds and
print each on its own line, then the client closes (handing its unused
numbers back) and the program exits 0. The Python branch of scripts/hilo-draw:

    draw.py [--targets=HOST:PORT,...] --collection=NAME --threads=N
            --seconds=S [--rate=R] [--stats]

It keeps drawing through UNAVAILABLE (every target down for a moment) until
S is over. --rate paces each thread to R IDs a second; --stats ends with one
line on stderr, `draw.py: ids=N longest_wait_ms=W`, W being the longest an
ID took to come (failed tries and the waits between them included). Any other error prints one line naming it to stderr and exits 1.
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
    for w in workers:
        w.join()
    sys.stdout.flush()
    if errors:
        client.close()
        print(f"draw.py: drawing from {args.collection!r} failed: "
              f"{errors[0]}", file=sys.stderr)
        return 1
    client.close()
    if args.stats:
        print(f"draw.py: ids={counted['ids']} "
              f"longest_wait_ms={counted['longest'] * 1000:.1f}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
