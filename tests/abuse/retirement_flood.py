#!/usr/bin/env python3
"""Issue 36 item 3: one caller's creations fill the node, and the operator
takes the places back by retiring the flood's names (DeleteCollection with
retire, hilo.proto), without ever letting a number of them repeat.

  retirement_flood.py retirement_flood HILO_SERVER

Against a real hilo_server with --max_collections=200: a flooder creates
new names, 32 calls in flight, until the node refuses with
RESOURCE_EXHAUSTED, and takes a second range of some of them; a victim's
creation is refused. The operator retires every flood name: each answer's
retired_max is exactly the highest number the flood was handed for that
name. Then the victim creates its collection (its first range starts at 1),
the listing shows the victim's names alone, late returns of the flood's
ranges are refused and lower nothing, and a flood name used again starts
exactly one above its retired Max. Exit 0 when every check holds.
"""
import sys

import grpc

import abuse_lib as lib

DELETE = "/hilo.v1.HiLoAdmin/DeleteCollection"
RETURN = "/hilo.v1.HiLo/ReturnRange"
MAX_COLLECTIONS = 200


def fields(message):
    """{field number: value} of a message's varint, fixed64 and bytes
    fields (the last of each number)."""
    out, i = {}, 0
    while i < len(message):
        key, i = lib.read_varint(message, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            out[number], i = lib.read_varint(message, i)
        elif kind == 1:
            out[number] = int.from_bytes(message[i:i + 8], "little")
            i += 8
        elif kind == 2:
            n, i = lib.read_varint(message, i)
            out[number] = message[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {kind} in a reply")
    return out


def call(ch, path, body):
    return fields(ch.unary_unary(path, request_serializer=None,
                                 response_deserializer=None)(body, timeout=5))


def next_range(ch, name, last_max=0):
    """(low, high, range_token) of a NextRange of `name`."""
    reply = call(ch, lib.NEXT, lib.next_range_request(name, last_max))
    return reply.get(1, 0), reply.get(2, 0), reply.get(5, 0)


def retire(ch, name):
    """DeleteCollection with retire: the reply's retired_max."""
    body = lib.field_bytes(1, name.encode()) + lib.field_varint(2, 1)
    return call(ch, DELETE, body).get(2, 0)


def return_tail(ch, name, end, last, token):
    """A ReturnRange as the range's holder sends it: (applied, max)."""
    body = (lib.field_bytes(1, name.encode()) + lib.field_varint(2, end) +
            lib.field_varint(3, last) + lib.varint(5 << 3 | 1) +
            token.to_bytes(8, "little"))
    reply = call(ch, RETURN, body)
    return bool(reply.get(1, 0)), reply.get(2, 0)


def flood(ch, issued):
    """Creates flood-NNNN names, 32 calls at a time, until the node refuses
    one; `issued` gets each name's ranges. The refusal's message."""
    stub = ch.unary_unary(lib.NEXT, request_serializer=None,
                          response_deserializer=None)
    i = 0
    while True:
        names = [f"flood-{i + k:04d}" for k in range(32)]
        i += 32
        futures = [(name, stub.future(lib.next_range_request(name), timeout=5))
                   for name in names]
        refusal = None
        for name, f in futures:
            try:
                reply = fields(f.result())
                issued[name] = [(reply[1], reply[2], reply.get(5, 0))]
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                refusal = error.details()
        if refusal is not None:
            return refusal


def retirement_flood(binary):
    checks = lib.Checks("retirement_flood")
    server = lib.Server(binary, f"--max_collections={MAX_COLLECTIONS}",
                        "--max_collection_creations_per_minute=0")
    ch = server.endpoint.channel()
    try:
        issued = {}
        refusal = flood(ch, issued)
        checks.figure("created_by_flood", len(issued))
        checks.expect(len(issued) == MAX_COLLECTIONS,
                      f"the flood created {len(issued)} collections; the "
                      f"limit is {MAX_COLLECTIONS}")
        checks.expect("--max_collections" in refusal,
                      f"the refusal does not name the limit: {refusal!r}")
        # A second range of every tenth name: its Max is that one's high.
        for name in sorted(issued)[::10]:
            issued[name].append(next_range(ch, name))
        try:
            next_range(ch, "victim-orders")
            checks.expect(False, "the victim created a collection on a full "
                                 "node")
        except grpc.RpcError as error:
            checks.expect(error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"the victim was refused with {error.code()}")

        for name, ranges in sorted(issued.items()):
            highest = max(high for _, high, _ in ranges)
            got = retire(ch, name)
            if got != highest:
                checks.expect(False, f"{name} retired at {got}; the flood "
                                     f"was handed up to {highest}")
        try:
            low, _, _ = next_range(ch, "victim-orders")
            checks.expect(low == 1,
                          f"the victim's first range starts at {low}")
        except grpc.RpcError as error:
            checks.expect(False, f"the victim was refused after the "
                                 f"retirements: {error.code()}")
        listed = ch.unary_unary(lib.LIST, request_serializer=None,
                                response_deserializer=None)(
                                    lib.list_request(1000), timeout=5)
        checks.expect(b"victim-orders" in listed and b"flood-" not in listed,
                      "the listing holds other names than the victim's")

        # A holder of a flood range hands its tail back after the
        # retirement: refused, and nothing is lowered or created.
        name = sorted(issued)[0]
        first_low, first_high, token = issued[name][-1]
        applied, left = return_tail(ch, name, first_high, first_low - 1, token)
        checks.expect(not applied and left == 0,
                      f"a late return to retired {name}: applied={applied}, "
                      f"max {left}")
        # The name used again: exactly above all it ever handed out.
        highest = max(h for _, h, _ in issued[name])
        low, high, _ = next_range(ch, name)
        checks.expect(low == highest + 1,
                      f"{name} used again starts at {low}; it had handed "
                      f"out up to {highest}")
        applied, left = return_tail(ch, name, first_high, first_low - 1, token)
        checks.expect(not applied and left == high,
                      f"a late return after the reuse: applied={applied}, "
                      f"max {left} (the new range ends at {high})")
        checks.figure("reused_range", f"[{low}, {high}]")
        rc, _ = server.terminate()
        checks.expect(rc == 0, f"SIGTERM: exit {rc}")
    finally:
        ch.close()
        server.close()
    checks.finish()


ATTACKS = {f.__name__: f for f in (retirement_flood,)}

if __name__ == "__main__":
    ATTACKS[sys.argv[1]](sys.argv[2])
