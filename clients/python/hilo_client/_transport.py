"""The transport: a client's targets and the gRPC calls to them. NextRange
with fail-over to the next target (and the refusal of a reply that breaks
the contract, CONTRACT.md R11), ReturnRange and ReturnRanges with each
range's token, retried on UNAVAILABLE or DEADLINE_EXCEEDED within one RPC
deadline, and the small records these calls take and give (_Previous,
_Issued, _ReturnItem, ...). Private to hilo_client."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import grpc

try:
    from hilo.v1 import hilo_pb2, hilo_pb2_grpc
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "hilo_client needs the generated Python stubs (module hilo.v1): run "
        "scripts/gen-stubs.sh and put build/gen/python on PYTHONPATH") from e

from hilo_client._fork_gate import FORK_GATE
from hilo_client._held import HeldNumbers
from hilo_client._values import HiloError

# Codes on which the client tries the next target, as the C++ client does,
# and on which it tries a tokened return again.
_FAIL_OVER = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

# A node tag: 1-4 characters, each A-Z or 0-9 (hilo.proto, node_tag).
_NODE_TAG = re.compile(r"[A-Z0-9]{1,4}")

# Attempts of one tokened return (all within one RPC deadline), and the pause
# before the second attempt, doubled before each later one.
_RETURN_ATTEMPTS = 3
_RETURN_BACKOFF = 0.05

# One ReturnRanges call: the server takes at most 1000 items and a 64 KiB
# request; these stay under them, as the C++ client's limits do.
_MAX_BATCH_ITEMS = 1000
_MAX_BATCH_BYTES = 60 * 1024
# ReturnRanges calls in flight at once, all targets together.
_BATCH_THREADS = 4

# google.rpc.Code values (ReturnRangeResult.code) as grpc.StatusCode.
_CODES: Dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}

class _Previous(NamedTuple):
    """What the client tells the server about its previous range."""

    size: int = 0  # 0 if none
    range_at: Optional[object] = None  # google.protobuf.Timestamp, or None
    max: int = 0  # its high (or the last number used, after a return)


class _Issued(NamedTuple):
    """A range as a server issued it."""

    low: int
    high: int
    node_tag: str
    range_at: object  # google.protobuf.Timestamp
    source: int  # index of the target that issued it; returns go there
    token: int  # range_token: sent with the return; 0 from servers without


class _Target(NamedTuple):
    name: str
    channel: grpc.Channel
    stub: hilo_pb2_grpc.HiLoStub


class _ReturnResult(NamedTuple):
    """A return the node judged: applied, or refused (which is normal)."""

    applied: bool
    max: int


class _ReturnItem(NamedTuple):
    """One return of return_many: (last, issued.high] of `issued`. With
    with_next, this item and the next are a pair of adjacent ranges of one
    node (the later range whole, then the earlier one's unused tail): they
    go in one call, in this order."""

    collection: str
    issued: _Issued
    last: int
    with_next: bool = False


@dataclass
class _Batch:
    """One ReturnRanges call: items (indexes into return_many's items, in
    order) of one target, and the request's size so far."""

    target: int
    items: List[int]
    request: object  # hilo_pb2.ReturnRangesRequest
    bytes: int


def _return_request(collection: str, issued: _Issued, last: int):
    """The ReturnRangeRequest handing back (last, issued.high]."""
    return hilo_pb2.ReturnRangeRequest(
        collection=collection, end=issued.high, last=last,
        node_tag=issued.node_tag, range_token=issued.token)


def _batch_result(target: _Target, batch: _Batch, response,
                  k: int) -> Union[_ReturnResult, HiloError]:
    """The outcome of item k of `batch` from the ReturnRangesResponse."""
    if len(response.results) != len(batch.request.returns):
        return HiloError(
            grpc.StatusCode.INTERNAL,
            f"{target.name}: ReturnRanges answered {len(response.results)} "
            f"results for {len(batch.request.returns)} returns")
    r = response.results[k]
    if r.code != 0:
        return HiloError(_CODES.get(r.code, grpc.StatusCode.UNKNOWN),
                         f"{target.name}: {r.message}")
    return _ReturnResult(r.applied, r.max)


# The most numbers a client takes in one range (CONTRACT.md R11): a server's
# ranges are at most its --max_range_size (2^20 by default); a bigger one
# is a tampered reply or a broken server, whose high echoed as last_max
# every node would then refuse.
_MAX_RANGE_SIZE = 1 << 32
# google.protobuf.Timestamp's range, 0001-01-01 to 9999-12-31: a range_at
# outside it is refused, never echoed.
_MIN_TIMESTAMP_SECONDS, _MAX_TIMESTAMP_SECONDS = -62135596800, 253402300799
# A node far behind the one that issued the range a request reports refuses
# that echo with one of these (the last_max guard rail, or a field it finds
# malformed): it is asked again at once without it (CONTRACT.md R17).
_ECHO_REFUSED = (grpc.StatusCode.FAILED_PRECONDITION,
                 grpc.StatusCode.INVALID_ARGUMENT)


def _NOT_CONNECTED(e: grpc.RpcError) -> bool:
    """Whether a call failed without reaching a server: UNAVAILABLE from the
    channel itself, not a status a server (or a proxy) sent."""
    return (e.code() == grpc.StatusCode.UNAVAILABLE
            and "failed to connect" in (e.details() or ""))


def _refusal(response, held: Optional[HeldNumbers]) -> Optional[str]:
    """Why the client refuses a NextRangeResponse (CONTRACT.md R11), or
    None: a range that is empty or starts below 1, a node tag that is not
    1-4 characters of A-Z and 0-9, or a range that overlaps numbers the
    client holds or handed out from that node's ranges of the collection
    (they could be handed out twice; HeldNumbers.refusal)."""
    if response.low < 1 or response.high < response.low:
        return (f"NextRange replied with an invalid range "
                f"[{response.low}, {response.high}]")
    if response.high - response.low >= _MAX_RANGE_SIZE:
        return (f"NextRange replied with the range [{response.low}, "
                f"{response.high}] of {response.high - response.low + 1} "
                f"numbers; a client takes at most {_MAX_RANGE_SIZE} in one "
                f"range")
    at = response.range_at
    if not (_MIN_TIMESTAMP_SECONDS <= at.seconds <= _MAX_TIMESTAMP_SECONDS
            and 0 <= at.nanos <= 999_999_999):
        return (f"NextRange replied with range_at {at.seconds} s "
                f"{at.nanos} ns, which is not a valid Timestamp (0001-01-01 "
                f"to 9999-12-31)")
    if not _NODE_TAG.fullmatch(response.node_tag):
        return (f"NextRange replied with node tag {response.node_tag!r}; a "
                f"tag is 1-4 characters of A-Z and 0-9")
    if held is None:
        return None
    return held.refusal(response.node_tag, response.low, response.high)


class _GrpcRangeSource:
    """Talks to the targets: NextRange with fail-over, ReturnRange and
    ReturnRanges (with the ranges' tokens, retried on UNAVAILABLE or
    DEADLINE_EXCEEDED) to the target that issued the range. Thread-safe."""

    def __init__(self, targets: List[_Target], rpc_deadline: float):
        self._targets = targets
        self._deadline = rpc_deadline
        self._preferred = 0  # an int store is atomic under the GIL
        # Per target: it answered ReturnRanges with UNIMPLEMENTED.
        self._no_batches = [False] * len(targets)
        self._failovers_lock = threading.Lock()
        self.failovers = 0  # ClientStats.failovers

    def next(self, collection: str, previous: _Previous,
             held: Optional[HeldNumbers] = None) -> _Issued:
        """The next range of `collection`, from the preferred target or, if
        it fails with UNAVAILABLE or DEADLINE_EXCEEDED or its reply is
        refused (_refusal), from each other target in turn; the target that
        gives a usable range becomes the preferred one. `held` is what
        the client holds or handed out of each node's ranges of the
        collection (a reply overlapping it is refused). Raises HiloError: the server's code for any
        other error, INTERNAL naming every target when a reply was refused
        and no target gave a usable range, otherwise UNAVAILABLE."""
        request = hilo_pb2.NextRangeRequest(
            collection=collection, last_size=previous.size,
            last_max=previous.max)
        if previous.range_at is not None:
            request.last_range_at.CopyFrom(previous.range_at)
        echoes = (previous.size != 0 or previous.max != 0
                  or previous.range_at is not None)
        failures = []
        any_refused = False
        first = self._preferred
        for i in range(len(self._targets)):
            index = (first + i) % len(self._targets)
            target = self._targets[index]
            start = time.monotonic()
            try:
                try:
                    try:
                        with FORK_GATE.call(self._deadline):
                            response = target.stub.NextRange(
                                request, timeout=self._deadline)
                    except grpc.RpcError as e:
                        left = self._deadline - (time.monotonic() - start)
                        if not (_NOT_CONNECTED(e) and left > 0):
                            raise
                        # A sync call to a channel in back-off fails at
                        # once and does not move its connection on; one
                        # that waits for the channel does, within what is
                        # left of this attempt's deadline (CONTRACT.md
                        # R18). No polling thread: it would make a forked
                        # child hang (R16).
                        with FORK_GATE.call(left):
                            response = target.stub.NextRange(
                                request, timeout=left, wait_for_ready=True)
                except grpc.RpcError as e:
                    if e.code() not in _ECHO_REFUSED or not echoes:
                        raise
                    # Its IDs carry its own tag, and a range at or below
                    # what the client has from that very node is still
                    # refused below (held): dropping the echo repeats none.
                    with FORK_GATE.call(self._deadline):
                        response = target.stub.NextRange(
                            hilo_pb2.NextRangeRequest(collection=collection),
                            timeout=self._deadline)
            except grpc.RpcError as e:
                code = e.code()
                if code not in _FAIL_OVER:
                    raise HiloError(code, f"{target.name}: {e.details()}")
                failures.append(f"{target.name}: {code.name}: {e.details()}")
                continue
            refusal = _refusal(response, held)
            if refusal is not None:
                # A server that breaks the contract: its range is skipped
                # (never used, never returned) and the next target asked.
                any_refused = True
                failures.append(f"{target.name}: {refusal}")
                continue
            self._preferred = index
            if i > 0:
                with self._failovers_lock:
                    self.failovers += 1
            return _Issued(response.low, response.high, response.node_tag,
                           response.range_at, index, response.range_token)
        if any_refused:
            # Not UNAVAILABLE: a misbehaving server does not get better by
            # retrying.
            raise HiloError(
                grpc.StatusCode.INTERNAL,
                f"no hilo server gave a usable range of {collection!r}: "
                + "; ".join(failures))
        raise HiloError(
            grpc.StatusCode.UNAVAILABLE,
            f"no hilo server answered NextRange for {collection!r}: "
            + "; ".join(failures))

    def return_(self, collection: str, issued: _Issued, last: int):
        """Hands (last, issued.high] back to the target that issued it, with
        the range's token; the ReturnRangeResponse (applied is False when
        the node refused it, which is normal). Raises HiloError.

        A tokened return applies at most once, so one that failed with
        UNAVAILABLE or DEADLINE_EXCEEDED is sent again, to the same target,
        up to _RETURN_ATTEMPTS times in all, every attempt within one RPC
        deadline counted from the first (each attempt may take an equal
        share of what is left, so a timed-out attempt leaves time for the
        next). If an earlier attempt was applied and only its reply was
        lost, the retry is refused (applied False); the numbers are back
        either way. A range without a token (from a server older than
        tokens) is returned without one and never retried: such a return
        could be applied twice."""
        target = self._targets[issued.source]
        return self._call_with_retries(
            target, "ReturnRange", target.stub.ReturnRange,
            _return_request(collection, issued, last),
            _RETURN_ATTEMPTS if issued.token != 0 else 1)

    def return_many(self, items: Sequence[_ReturnItem]
                    ) -> List[Union[_ReturnResult, HiloError]]:
        """Hands back many ranges at once: items are _ReturnItems, and the
        outcome of each, in order, is a _ReturnResult or the HiloError that
        item failed with.

        Each target's items go as ReturnRanges calls of at most
        _MAX_BATCH_ITEMS items and _MAX_BATCH_BYTES bytes (the server takes
        1000 items and 64 KiB), up to _BATCH_THREADS calls at once; a pair
        (with_next) is never split across two calls, so the node judges its
        second item right after the first. A batch
        is retried as return_ retries one return, but only if every item has
        a token (the tokens make a retry of an applied batch refused, never
        applied twice). A target that answers UNIMPLEMENTED (older than
        ReturnRanges; nothing of the batch was applied) gets this batch and
        all later ones as single ReturnRange calls."""
        results: List[Union[_ReturnResult, HiloError]] = [
            HiloError(grpc.StatusCode.UNKNOWN, "not sent")] * len(items)
        batches: List[_Batch] = []
        open_batch = {}  # target index -> index into batches
        i = 0
        while i < len(items):
            source = items[i].issued.source
            # The item, or the pair it starts (a pair of two targets'
            # ranges is two single items).
            count = 2 if (items[i].with_next and i + 1 < len(items)
                          and items[i + 1].issued.source == source) else 1
            requests = [_return_request(*items[k][:3])
                        for k in range(i, i + count)]
            # Each item, its field tag and its length.
            size = sum(r.ByteSize() + 4 for r in requests)
            b = open_batch.get(source)
            if (b is None
                    or len(batches[b].items) + count > _MAX_BATCH_ITEMS
                    or batches[b].bytes + size > _MAX_BATCH_BYTES):
                b = open_batch[source] = len(batches)
                batches.append(_Batch(source, [],
                                      hilo_pb2.ReturnRangesRequest(), 0))
            batch = batches[b]
            for k, request in enumerate(requests):
                batch.items.append(i + k)
                batch.request.returns.append(request)
            batch.bytes += size
            i += count

        def send(batch: _Batch) -> None:
            target = self._targets[batch.target]
            if not self._no_batches[batch.target]:
                all_tokens = all(items[i].issued.token != 0
                                 for i in batch.items)
                try:
                    response = self._call_with_retries(
                        target, "ReturnRanges", target.stub.ReturnRanges,
                        batch.request,
                        _RETURN_ATTEMPTS if all_tokens else 1)
                except HiloError as e:
                    if e.code != grpc.StatusCode.UNIMPLEMENTED:
                        for i in batch.items:
                            results[i] = e
                        return
                    self._no_batches[batch.target] = True
                else:
                    for k, i in enumerate(batch.items):
                        results[i] = _batch_result(target, batch, response, k)
                    return
            # One by one, in order, as to a server without batches.
            for i in batch.items:
                try:
                    r = self.return_(*items[i][:3])
                    results[i] = _ReturnResult(r.applied, r.max)
                except HiloError as e:
                    results[i] = e

        if len(batches) == 1:
            send(batches[0])
        elif batches:
            with ThreadPoolExecutor(
                    max_workers=min(_BATCH_THREADS, len(batches))) as pool:
                for done in [pool.submit(send, b) for b in batches]:
                    done.result()
        return results

    def _call_with_retries(self, target: _Target, method: str, call,
                           request, attempts: int):
        """call(request) on `target`, tried up to `attempts` times while it
        fails with UNAVAILABLE or DEADLINE_EXCEEDED, all within one RPC
        deadline (see return_). The reply, or raises HiloError."""
        give_up_at = time.monotonic() + self._deadline
        backoff = _RETURN_BACKOFF
        code = grpc.StatusCode.DEADLINE_EXCEEDED
        failures = 0
        last_failure = ""
        for attempt in range(attempts):
            left = give_up_at - time.monotonic()
            if left <= 0:
                break
            try:
                timeout = left / (attempts - attempt)
                with FORK_GATE.call(timeout):
                    return call(request, timeout=timeout)
            except grpc.RpcError as e:
                code = e.code()
                if code not in _FAIL_OVER:
                    raise HiloError(
                        code, f"{target.name}: {e.details()}") from None
                failures += 1
                last_failure = f"{code.name}: {e.details()}"
            if attempt + 1 < attempts:
                time.sleep(max(0.0, min(backoff,
                                        give_up_at - time.monotonic())))
                backoff *= 2
        raise HiloError(
            code, f"{target.name}: {method} failed {failures} time(s) "
            f"within {self._deadline:g} s; the last time: {last_failure}")

    def close(self):
        for target in self._targets:
            target.channel.close()
