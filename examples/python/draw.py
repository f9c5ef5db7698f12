"""draw.py: N threads take document IDs from one collection for S seconds and
print each on its own line, then the client closes (handing its unused
numbers back) and the program exits 0. The Python branch of scripts/hilo-draw:

    draw.py [--targets=HOST:PORT,...] --collection=NAME --threads=N
            --seconds=S

It keeps drawing through UNAVAILABLE (every target down for a moment) until
S is over. Any other error prints one line naming it to stderr and exits 1.
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
    args = parser.parse_args()
    if args.threads < 1 or not args.seconds >= 0:
        print("draw.py: needs --threads >= 1 and --seconds >= 0",
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

    def draw() -> None:
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
            with out_lock:
                sys.stdout.write(doc + "\n")

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
