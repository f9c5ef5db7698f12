"""A scripted gRPC proxy in front of one real hilo_server, for the
conformance runner (run.py).

Every hilo.v1.HiLo call is forwarded to the real server and its real answer
sent back, so the proxy obeys every rule of the real server by construction;
a scenario's script alters only what it names:

    latency_ms   added before every forwarded call
    hold_ms      NextRange replies are held this long before they leave
                 (past the client's deadline: the reply comes too late)
    delay_ms     NextRange replies are held this long before they leave,
                 within the client's deadline: a slow reply, still valid
                 (if the client gave up meanwhile, the range counts as
                 never having reached it)
    tag          NextRange replies carry this node tag instead ("ab!")
    low          NextRange replies start at this number (0: below 1)
    high         NextRange replies end at this number (below low: empty)
    replay_first NextRange replies repeat the first range this proxy saw
                 (low, high and tag): a range at or below the last one
    range_at_shift_s  NextRange replies say the range was issued this many
                 seconds later (negative: earlier) than the server said
    range_at_seconds  NextRange replies carry this range_at (seconds, nanos
                 0), valid or not (253402300800 is past 9999-12-31)
    alter_count  how many NextRange replies the alterations above apply to
                 (then the proxy is transparent again); absent: all
    return_hold_ms  ReturnRange and ReturnRanges replies are held this long
                 after the node answered (the return applied; past the
                 client's deadline, the client sees it fail)

The proxy records what passed: every NextRange (the request's last_size,
last_range_at and last_max, and the reply as the server gave it and as the
client got it), and every returned range (whether by ReturnRange or as an
item of ReturnRanges, with the call it came in). It checks each return
against the ranges it saw issued (rule: a return names a range the client
holds, with that range's tag and token, end = its high, low - 1 <= last <=
high) and keeps every breach in `violations`.

With `who` set (a function of the call's context, peers.py), each issued
range and each return also records which client (driver) it came from, and
each return when it arrived, for the runner's checks across a scenario's
IDs (scenario.py).
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import grpc

try:
    from hilo.v1 import hilo_pb2, hilo_pb2_grpc
except ImportError as e:  # the runner's most common set-up mistake
    raise SystemExit(
        f"hilo conformance: the generated Python stubs (module hilo.v1) are "
        f"not on PYTHONPATH ({e}); run scripts/gen-stubs.sh OUT_DIR python "
        f"and put OUT_DIR/python there") from None


@dataclass
class Issued:
    """A range the real server issued through this proxy."""
    low: int
    high: int
    tag: str
    token: int
    range_at_us: int
    collection: str
    broken: bool  # the client got a reply that breaks the contract
    client: Optional[str] = None  # the driver it went to, if known


@dataclass
class ReturnSeen:
    collection: str
    end: int
    last: int
    tag: str
    token: int
    call: int  # sequence number of the RPC it came in
    method: str  # ReturnRange or ReturnRanges
    index: int  # position within that call
    applied: Optional[bool] = None
    code: int = 0
    client: Optional[str] = None  # the driver it came from, if known
    at: float = 0.0  # time.monotonic() when it reached the proxy


def _ts_us(ts) -> int:
    return ts.seconds * 1_000_000 + ts.nanos // 1000


# google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to
# 9999-12-31T23:59:59.999999999Z.
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300799


def _valid_timestamp(ts) -> bool:
    return (_MIN_SECONDS <= ts.seconds <= _MAX_SECONDS and
            0 <= ts.nanos <= 999_999_999)


class Proxy(hilo_pb2_grpc.HiLoServicer):
    def __init__(self, backend: str):
        self.backend = backend
        self._channel = grpc.insecure_channel(backend)
        self._stub = hilo_pb2_grpc.HiLoStub(self._channel)
        self._lock = threading.Lock()
        self.script: Dict = {}
        self._altered = 0
        self.next_ranges: List[Dict] = []  # one per NextRange call
        self.issued: List[Issued] = []
        self.returns: List[ReturnSeen] = []
        self.violations: List[str] = []
        self._calls = 0
        # context -> the client's name or None (peers.py); None: unknown.
        self.who: Optional[Callable] = None
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        hilo_pb2_grpc.add_HiLoServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None).wait(5)
        self._channel.close()

    def set_script(self, script: Dict) -> None:
        with self._lock:
            self.script = dict(script)
            self._altered = 0

    # -- counting ---------------------------------------------------------

    def count(self, method: str) -> int:
        with self._lock:
            if method == "NextRange":
                return len(self.next_ranges)
            if method == "NextRange.replied":
                return sum(1 for e in self.next_ranges if e.get("done"))
            return sum(1 for r in self.returns if r.method == method)

    def return_calls(self) -> List[List[ReturnSeen]]:
        """Returned ranges grouped by the RPC they came in, in call order."""
        with self._lock:
            calls: Dict[int, List[ReturnSeen]] = {}
            for r in self.returns:
                calls.setdefault(r.call, []).append(r)
            return [sorted(v, key=lambda r: r.index)
                    for _, v in sorted(calls.items())]

    # -- forwarding -------------------------------------------------------

    @staticmethod
    def _timeout(context) -> Optional[float]:
        left = context.time_remaining()
        return None if left is None else max(0.001, left)

    def _forward(self, call, request, context):
        latency = self.script.get("latency_ms", 0)
        if latency:
            time.sleep(latency / 1000.0)
        try:
            return call(request, timeout=self._timeout(context))
        except grpc.RpcError as e:
            context.abort(e.code(), e.details() or "")

    def _take_alteration(self) -> bool:
        with self._lock:
            keys = ("hold_ms", "delay_ms", "tag", "low", "high",
                    "replay_first", "range_at_shift_s", "range_at_seconds")
            if not any(k in self.script for k in keys):
                return False
            limit = self.script.get("alter_count")
            if limit is not None and self._altered >= limit:
                return False
            self._altered += 1
            return True

    def _client(self, context) -> Optional[str]:
        return self.who(context) if self.who is not None else None

    def NextRange(self, request, context):
        client = self._client(context)
        with self._lock:
            self._calls += 1
            entry = {
                "collection": request.collection,
                "last_size": request.last_size,
                "last_range_at_us": (_ts_us(request.last_range_at)
                                     if request.HasField("last_range_at")
                                     else None),
                "last_max": request.last_max,
                "last_range_at_valid": (
                    not request.HasField("last_range_at") or
                    _valid_timestamp(request.last_range_at)),
            }
            self.next_ranges.append(entry)
        reply = self._forward(self._stub.NextRange, request, context)
        alter = self._take_alteration()
        out = hilo_pb2.NextRangeResponse()
        out.CopyFrom(reply)
        hold = delay = 0
        if alter:
            s = self.script
            if s.get("replay_first"):
                with self._lock:
                    first = next((i for i in self.issued
                                  if i.collection == request.collection),
                                 None)
                if first is not None:
                    out.low, out.high = first.low, first.high
                    out.node_tag = first.tag
            if "tag" in s:
                out.node_tag = s["tag"]
            if "low" in s:
                out.low = s["low"]
            if "high" in s:
                out.high = s["high"]
            if "range_at_shift_s" in s:
                shifted = _ts_us(out.range_at) + int(
                    s["range_at_shift_s"] * 1_000_000)
                out.range_at.seconds = shifted // 1_000_000
                out.range_at.nanos = (shifted % 1_000_000) * 1000
            if "range_at_seconds" in s:
                out.range_at.seconds = s["range_at_seconds"]
                out.range_at.nanos = 0
            hold = s.get("hold_ms", 0)
            delay = s.get("delay_ms", 0)
        issued = Issued(
            reply.low, reply.high, reply.node_tag, reply.range_token,
            _ts_us(reply.range_at), request.collection,
            bool(hold) or (out.low, out.high, out.node_tag) !=
            (reply.low, reply.high, reply.node_tag) or
            not _valid_timestamp(out.range_at), client)
        with self._lock:
            self.issued.append(issued)
            entry.update(done=True, low=reply.low, high=reply.high,
                         tag=reply.node_tag, token=reply.range_token,
                         range_at_us=_ts_us(out.range_at),
                         sent_low=out.low, sent_high=out.high,
                         sent_tag=out.node_tag, held_ms=hold)
        if hold:
            time.sleep(hold / 1000.0)
        if delay:
            time.sleep(delay / 1000.0)
            if not context.is_active():
                # The client's deadline passed (or it cancelled): the
                # reply never reaches it, so none of its numbers may be
                # handed out.
                with self._lock:
                    issued.broken = True
        return out

    def _check_return(self, r: ReturnSeen) -> None:
        """Called with the lock held."""
        match = [i for i in self.issued
                 if i.collection == r.collection and i.token == r.token]
        what = (f"return of {r.collection!r} end {r.end} last {r.last} "
                f"tag {r.tag!r} token {r.token:#x}")
        if not match:
            self.violations.append(
                f"{what}: no range with that token was issued to the client")
            return
        i = match[0]
        if i.broken:
            self.violations.append(
                f"{what}: returns a range whose reply broke the contract "
                f"(it must never have been used)")
        if r.end != i.high:
            self.violations.append(
                f"{what}: end is not the range's high {i.high}")
        if r.tag != i.tag:
            self.violations.append(
                f"{what}: tag is not the range's tag {i.tag!r}")
        if not i.low - 1 <= r.last <= i.high:
            self.violations.append(
                f"{what}: last is outside [{i.low - 1}, {i.high}] "
                f"(the range is {i.low}-{i.high})")

    def _record_returns(self, method: str, items,
                        context) -> List[ReturnSeen]:
        client = self._client(context)
        at = time.monotonic()
        with self._lock:
            self._calls += 1
            call = self._calls
            seen = []
            for k, item in enumerate(items):
                r = ReturnSeen(item.collection, item.end, item.last,
                               item.node_tag, item.range_token, call, method,
                               k, client=client, at=at)
                self._check_return(r)
                self.returns.append(r)
                seen.append(r)
            return seen

    def ReturnRange(self, request, context):
        seen = self._record_returns("ReturnRange", [request], context)
        reply = self._forward(self._stub.ReturnRange, request, context)
        with self._lock:
            seen[0].applied = reply.applied
        self._hold_return()
        return reply

    def ReturnRanges(self, request, context):
        seen = self._record_returns("ReturnRanges", request.returns, context)
        reply = self._forward(self._stub.ReturnRanges, request, context)
        with self._lock:
            for r, result in zip(seen, reply.results):
                r.applied = result.applied
                r.code = result.code
        self._hold_return()
        return reply

    def _hold_return(self) -> None:
        hold = self.script.get("return_hold_ms", 0)
        if hold:
            time.sleep(hold / 1000.0)
