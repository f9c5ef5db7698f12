"""Calls a hilo server through the generated Python stubs.

    PYTHONPATH=build/gen/python /usr/bin/python3 examples/python/hilo_example.py \
        127.0.0.1:50051 [COLLECTION]

Uses a new collection (a unique name unless one is given), so the ranges are
exact: 1-32, then 33-64 for a second client, 65-128 for a client that reports
its previous range, and after handing back all of that range but its first
number, 66-97. Each range carries a range_token (never 0); the return sends
it and is applied, the same return sent again is refused (a node applies a
return at most once), and a return without a token fails with
FAILED_PRECONDITION. A bad collection name must fail with INVALID_ARGUMENT.
Exits 1 on any difference.
"""

import os
import sys
import time

import grpc

from hilo.v1 import hilo_pb2, hilo_pb2_grpc


def check(what, got, want):
    if got != want:
        print(f"FAIL {what}: got {got!r}, want {want!r}")
        sys.exit(1)
    print(f"ok   {what}: {got!r}")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    target = argv[1]
    collection = argv[2] if len(argv) > 2 else (
        f"example-python-{os.getpid()}-{time.time_ns()}")

    with grpc.insecure_channel(target) as channel:
        stub = hilo_pb2_grpc.HiLoStub(channel)

        def next_range(**kw):
            return stub.NextRange(
                hilo_pb2.NextRangeRequest(collection=collection, **kw),
                timeout=10)

        first = next_range()
        check("first range", (first.low, first.high), (1, 32))
        check("node tag", first.node_tag, "A")
        check("range_at set", first.HasField("range_at"), True)

        second = next_range()  # another client: no previous range
        check("second range starts after the first", second.low,
              first.high + 1)
        check("second range", (second.low, second.high), (33, 64))

        # A client reporting its previous range, issued just now: size doubles.
        third = next_range(last_size=second.high - second.low + 1,
                           last_range_at=second.range_at,
                           last_max=second.high)
        check("third range (size doubled)", (third.low, third.high),
              (65, 128))

        check("range_token set", third.range_token != 0, True)

        def return_range(**kw):
            return stub.ReturnRange(
                hilo_pb2.ReturnRangeRequest(collection=collection, **kw),
                timeout=10)

        # Used only 65: hand back 66-128, with the range's token.
        tail = dict(end=third.high, last=third.low, node_tag=third.node_tag,
                    range_token=third.range_token)
        returned = return_range(**tail)
        check("return of the unused tail applied", returned.applied, True)
        check("max after the return", returned.max, 65)
        # The token is spent: a retried or duplicated return changes nothing.
        again = return_range(**tail)
        check("the same return again is refused",
              (again.applied, again.max), (False, 65))
        try:
            return_range(end=third.high, last=third.low,
                         node_tag=third.node_tag)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        check("return without a range_token", code,
              grpc.StatusCode.FAILED_PRECONDITION)
        check("next range continues after the return",
              (lambda r: (r.low, r.high))(next_range()), (66, 97))

        for bad in ["", "bad\ncollection", "x" * 257]:
            try:
                stub.NextRange(hilo_pb2.NextRangeRequest(collection=bad),
                               timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            check(f"bad collection {bad[:12]!r}", code,
                  grpc.StatusCode.INVALID_ARGUMENT)

    print("python example: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
