"""hilo_client.Client: document IDs from a hilo service, without a round trip
per ID. The Python counterpart of the C++ hilo::Client
(client_cpp/include/hilo/client.h).

The client keeps one range of numbers per collection, obtained from a hilo
server with NextRange, and hands its numbers out locally. Each number keeps
the tag of the node that issued its range, so IDs stay unique across nodes::

    with hilo_client.Client(["hilo-0.hilo:50051", "hilo-1.hilo:50051"]) as c:
        c.next_document_id("orders")   # "orders/1-A"

A Client is safe for concurrent use by many threads. While a collection's
range lasts, next_id takes one short lock. When a fifth of a range is used
(prefetch_at), the next one is fetched on a background thread and kept
aside, so callers switch ranges without waiting on the network; if a range
does run dry first, exactly one caller asks a server (or waits for the
fetch already in flight, the prefetch included) and the other callers of
that collection wait for it. Ranges grow while a collection is busy (the
client reports its previous range with each request) and never move down.

close() (or leaving a ``with`` block) hands the unused numbers back to the
node that issued them, so the next client continues right after the last
number this one used: all collections at once, in ReturnRanges calls of up
to 1000 ranges per node (one ReturnRange per range to a node older than
ReturnRanges). A range fetched ahead goes back whole, then the current
range's tail; when they are adjacent ranges of one node, both go in one
ReturnRanges call, the later range first (README "A pair of adjacent
ranges"). Nothing is returned from a destructor: call close().

Each range comes with a range_token, a random secret of the node that issued
it. The client keeps it with the range and sends it with the range's return;
the node applies a tokened return at most once (and only for the range it
issued last), so the client retries a call that failed with UNAVAILABLE or
DEADLINE_EXCEEDED, on the same node, within one RPC deadline. A call holding
a range without a token is sent once. Every deadline is measured on
time.monotonic() or handed to gRPC as a relative timeout, so a step of the
wall clock neither stretches nor cuts one.

A reply that breaks the contract is refused (CONTRACT.md R11) and counts as
that target failing: the next target is asked, and if none gives a usable
range the call fails with INTERNAL naming every target. Refused are a range
that is empty or starts below 1, a node tag that is not 1-4 characters of
A-Z and 0-9 (IDs built with it could collide or fail to parse), and a range
at or below the highest number of its collection that the client holds or
handed out from that node's ranges (after an applied return: the last
number it used), whose numbers could be handed out twice.
"""

from __future__ import annotations

import collections
import logging
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import (Callable, Deque, Dict, List, NamedTuple, Optional,
                    Sequence, Tuple, Union)

import grpc

try:
    from hilo.v1 import hilo_pb2, hilo_pb2_grpc
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "hilo_client needs the generated Python stubs (module hilo.v1): run "
        "scripts/gen-stubs.sh and put build/gen/python on PYTHONPATH") from e

__all__ = ["Client", "ClientStats", "Id", "HiloError"]

_logger = logging.getLogger("hilo_client")

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


class Id(NamedTuple):
    """One number and the tag of the node whose range it came from."""

    number: int
    node_tag: str


class HiloError(Exception):
    """A failed call: ``code`` is the grpc.StatusCode, as the C++ client's
    absl::Status code. INVALID_ARGUMENT for a bad collection name (from the
    server); UNAVAILABLE, naming every target, when no server answered within
    its deadline; INTERNAL, naming every target, when a reply broke the
    contract (an invalid range or node tag, or a range at or below one the
    client had from that node) and no other target gave a
    usable range; otherwise the server's code."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class _OptionError(HiloError, ValueError):
    """A bad option: a HiloError with INVALID_ARGUMENT, and a ValueError as
    every bad option of the constructor is."""

    def __init__(self, message: str):
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message)


def _check_separator(separator: str) -> None:
    """Raises _OptionError for a separator that IDs cannot keep apart.

    An ID is read from its end: the tag follows the last '-' (a tag has no
    '-'), the number is the digits before it (a number has no sign), and the
    separator is the character right before those digits. A digit there
    could be read as part of the number, so two IDs could be equal; with
    '-' the last separator and the last '-' are the same character, so the
    number could not be read back. Any other character is safe."""
    if separator == "|":
        raise _OptionError(
            "separator '|' is reserved; use any other character but a digit "
            "or '-'")
    if separator in "0123456789":
        d = separator
        raise _OptionError(
            f"separator '{d}' is a digit; a digit can be read as part of the "
            f"number, so two IDs could be equal (collection 'a' number 1{d}5 "
            f"and collection 'a{d}1' number 5 would both be 'a{d}1{d}5-A')")
    if separator == "-":
        raise _OptionError(
            "separator '-' is the character that ends the number; the number "
            "of an ID is the digits between the last separator and the last "
            "'-', which would then be the same character, so the number "
            "could not be read back")


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
    # Not from the server: the client's R11 mark for this node before this
    # range was taken, what the mark goes back to when it is handed back
    # whole (none of its numbers was handed out).
    held_before: int = 0


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


def _refusal(response, held: Optional[Dict[str, int]]) -> Optional[str]:
    """Why the client refuses a NextRangeResponse (CONTRACT.md R11), or
    None: a range that is empty or starts below 1, a node tag that is not
    1-4 characters of A-Z and 0-9, or a range at or below held[tag], the
    highest number the client holds or handed out from that node's ranges
    of the collection (its numbers could be handed out twice)."""
    if response.low < 1 or response.high < response.low:
        return (f"NextRange replied with an invalid range "
                f"[{response.low}, {response.high}]")
    if not _NODE_TAG.fullmatch(response.node_tag):
        return (f"NextRange replied with node tag {response.node_tag!r}; a "
                f"tag is 1-4 characters of A-Z and 0-9")
    up_to = (held or {}).get(response.node_tag, 0)
    if response.low <= up_to:
        return (f"NextRange replied with {response.low}-{response.high} of "
                f"tag {response.node_tag!r}, but the client has numbers up "
                f"to {up_to} of that node; a new range must start above them")
    return None


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
             held: Optional[Dict[str, int]] = None) -> _Issued:
        """The next range of `collection`, from the preferred target or, if
        it fails with UNAVAILABLE or DEADLINE_EXCEEDED or its reply is
        refused (_refusal), from each other target in turn; the target that
        gives a usable range becomes the preferred one. `held` maps a node
        tag to the highest number of the collection the client holds or
        handed out from that node's ranges (after an applied return, the
        last number it used). Raises HiloError: the server's code for any
        other error, INTERNAL naming every target when a reply was refused
        and no target gave a usable range, otherwise UNAVAILABLE."""
        request = hilo_pb2.NextRangeRequest(
            collection=collection, last_size=previous.size,
            last_max=previous.max)
        if previous.range_at is not None:
            request.last_range_at.CopyFrom(previous.range_at)
        failures = []
        any_refused = False
        first = self._preferred
        for i in range(len(self._targets)):
            index = (first + i) % len(self._targets)
            target = self._targets[index]
            try:
                response = target.stub.NextRange(request,
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
                return call(request, timeout=left / (attempts - attempt))
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


class _Prefetcher:
    """One background thread that runs prefetch tasks in the order given, so
    that next_id never waits on the network to fetch ahead. Started with the
    first task; stop() drops the queued tasks and waits (bounded) for the
    running one. Thread-safe."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._tasks: Deque[Callable[[], None]] = collections.deque()
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    def schedule(self, task: Callable[[], None]) -> None:
        """Queues `task`; dropped after stop()."""
        with self._cond:
            if self._stopping:
                return
            self._tasks.append(task)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hilo-prefetch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._tasks or self._stopping)
                if self._stopping:
                    return
                task = self._tasks.popleft()
            task()

    def stop(self, timeout: float) -> None:
        """Drops the queued tasks and waits up to `timeout` seconds for the
        running one. Idempotent."""
        with self._cond:
            self._stopping = True
            self._tasks.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


@dataclass
class ClientStats:
    """Counters of a client's behaviour since it was created, named as the
    C++ hilo::ClientStats: each only grows.

    calls_waited: next_id calls that waited for a range to arrive from a
        server (or for the error of that attempt), rather than taking a
        cached number or a range fetched ahead.
    ranges_fetched: ranges a server issued to this client, however they
        were asked for; ranges_prefetched: of those, the ones fetched ahead
        of need (prefetch_at).
    failovers: NextRange calls that another target answered because the
        preferred one failed; that target is preferred from then on.
    returns_applied, returns_refused, returns_failed: unused ranges handed
        back (close, return_unused_ranges), one count per range: the node
        took them back; it refused them (it had issued a newer range: normal,
        the numbers stay unused); no answer after the retries, or an error
        (logged).
    errors: failed range fetches (prefetches included) and returns, by
        grpc.StatusCode; codes that never occurred are absent.
    """

    calls_waited: int = 0
    ranges_fetched: int = 0
    ranges_prefetched: int = 0
    failovers: int = 0
    returns_applied: int = 0
    returns_refused: int = 0
    returns_failed: int = 0
    errors: Dict[grpc.StatusCode, int] = field(default_factory=dict)


class _Unused(NamedTuple):
    """What a cache hands back: (range, last) pairs in the order they must
    reach their nodes; pair when they are two adjacent ranges of one node
    (the later one whole first), which go in one call."""

    returns: List[Tuple[_Issued, int]]
    pair: bool


class _RangeCache:
    """One collection's current range, handed out number by number, and the
    next range once it is fetched ahead. Exactly one caller at a time talks
    to the server for it (fetch, prefetch or return); the others wait. A
    number leaves only together with its own range's tag."""

    def __init__(self, collection: str, source: _GrpcRangeSource,
                 log: Callable[[str], None], prefetch_at: float,
                 schedule: Optional[Callable[[Callable[[], None]], None]]):
        self._collection = collection
        self._source = source
        self._log = log
        self._prefetch_at = prefetch_at if schedule is not None else 0.0
        self._schedule = schedule
        self._cond = threading.Condition(threading.Lock())
        self._range: Optional[_Issued] = None
        self._next = 0  # next number of _range to hand out
        # Taking this number of _range asks for the next range ahead.
        self._prefetch_number: Optional[int] = None
        self._ahead: Optional[_Issued] = None  # fetched ahead, not yet used
        self._busy = False  # a fetch, prefetch or return is in flight
        self._calls = 0  # completed or failed fetches and returns
        self._error: Optional[HiloError] = None  # of the last fetch
        self._previous = _Previous()
        # Per node tag: the highest number of this collection the client
        # holds or handed out from that node's ranges; after an applied
        # return, the last number it used. A new range of that node must
        # start above it (CONTRACT.md R11).
        self._held: Dict[str, int] = {}
        # The highest number handed out from a retired range (0: none).
        self._used_up_to = 0
        # ClientStats counters, under _cond.
        self._waited = 0
        self._fetched = 0
        self._prefetched = 0
        self._applied = 0
        self._refused = 0
        self._failed = 0
        self._errors: Dict[grpc.StatusCode, int] = {}

    def _use(self, issued: _Issued) -> None:
        """Makes `issued` the current range (with _cond held); the range it
        replaces was used up."""
        if self._range is not None:
            self._used_up_to = max(self._used_up_to, self._next - 1)
        self._range = issued
        self._next = issued.low
        self._prefetch_number = None
        if self._prefetch_at > 0:
            size = issued.high - issued.low + 1
            self._prefetch_number = issued.low + max(
                0, math.ceil(self._prefetch_at * size) - 1)

    def _take(self) -> Id:
        """The next number of the current range (with _cond held, the range
        not used up); its taker asks for a prefetch if it is the set one."""
        number = self._next
        self._next += 1
        if number == self._prefetch_number:
            self._prefetch_number = None
            self._schedule(self.prefetch)
        return Id(number, self._range.node_tag)

    def _count_error(self, e: HiloError) -> None:
        self._errors[e.code] = self._errors.get(e.code, 0) + 1

    def next(self) -> Id:
        with self._cond:
            waited = False
            while True:
                r = self._range
                if r is not None and self._next <= r.high:
                    if waited:
                        self._waited += 1
                    return self._take()
                if self._ahead is not None:
                    # The range fetched ahead takes over, no round trip.
                    self._use(self._ahead)
                    self._ahead = None
                    continue
                if not self._busy:
                    break
                waited = True
                calls = self._calls
                self._cond.wait_for(lambda: self._calls != calls)
                if self._error is not None and self._ahead is None and (
                        self._range is None or self._next > self._range.high):
                    # The fetch this caller waited for failed: share its error
                    # rather than have every waiter try again at once.
                    self._waited += 1
                    raise HiloError(self._error.code, self._error.message)
            # This caller fetches; callers arriving meanwhile wait above.
            self._busy = True
            previous = self._previous
            held = dict(self._held)
        try:
            issued = self._source.next(self._collection, previous, held)
        except BaseException as e:
            with self._cond:
                self._busy = False
                self._calls += 1
                self._waited += 1
                self._error = e if isinstance(e, HiloError) else None
                if self._error is not None:
                    self._count_error(self._error)
                self._cond.notify_all()
            raise
        with self._cond:
            self._busy = False
            self._calls += 1
            self._error = None
            self._fetched += 1
            self._waited += 1
            issued = issued._replace(
                held_before=self._held.get(issued.node_tag, 0))
            self._held[issued.node_tag] = issued.high
            self._use(issued)
            self._previous = _Previous(issued.high - issued.low + 1,
                                       issued.range_at, issued.high)
            self._cond.notify_all()
            return self._take()  # this caller takes the first number

    def prefetch(self) -> None:
        """Fetches the next range ahead of need, unless one is fetched or
        being fetched (or a return is in flight). Runs on the prefetch
        thread; a failure is left for the caller that runs dry, which
        fetches (and reports) by itself."""
        with self._cond:
            if self._busy or self._ahead is not None or self._range is None:
                return
            self._busy = True
            previous = self._previous
            held = dict(self._held)
        issued = None
        error: Optional[HiloError] = None
        try:
            issued = self._source.next(self._collection, previous, held)
        except HiloError as e:
            error = e
        except Exception as e:  # noqa: BLE001 - a closed channel, say
            error = HiloError(grpc.StatusCode.UNKNOWN,
                              f"prefetch of {self._collection!r}: {e}")
        with self._cond:
            self._busy = False
            self._calls += 1
            self._error = None  # not a caller's error
            if issued is not None:
                issued = issued._replace(
                    held_before=self._held.get(issued.node_tag, 0))
                self._ahead = issued
                self._held[issued.node_tag] = issued.high
                self._fetched += 1
                self._prefetched += 1
                # The server has moved past this range whatever we do.
                self._previous = _Previous(issued.high - issued.low + 1,
                                           issued.range_at, issued.high)
            elif error is not None:
                self._count_error(error)
            self._cond.notify_all()

    @property
    def collection(self) -> str:
        return self._collection

    def take_unused(self) -> Optional[_Unused]:
        """Retires the current range and the one fetched ahead and, if
        numbers of them are left, marks the cache busy and says what to hand
        back: the range fetched ahead whole (last = low - 1), then the
        current range's unused tail. end_return must follow. None if nothing
        is left."""
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)
            r = self._range
            returns: List[Tuple[_Issued, int]] = []
            pair = False
            if self._ahead is not None:
                a = self._ahead
                returns.append((a, a.low - 1))
                # Issued right above the current range by the same node: its
                # whole return makes the current range the last issued again,
                # so the tail can come back too (README "A pair of adjacent
                # ranges").
                pair = (r is not None and a.source == r.source
                        and a.low == r.high + 1)
                self._ahead = None
            if r is not None:
                # Retire the range first: from here on no caller takes its
                # numbers.
                self._range = None
                self._prefetch_number = None
                self._used_up_to = max(self._used_up_to, self._next - 1)
                if self._next <= r.high:
                    returns.append((r, self._next - 1))  # low - 1: none used
                # Our next range may start right after the last number we
                # handed out, whether the returns apply or not: the numbers
                # above it are no longer ours.
                self._previous = self._previous._replace(max=self._used_up_to)
            if not returns:
                return None
            self._busy = True
            return _Unused(returns, pair and len(returns) == 2)

    def end_return(self, unused: _Unused,
                   outcomes: Sequence[Union[_ReturnResult, HiloError]]
                   ) -> None:
        """Ends the return take_unused began: counts and logs each outcome
        (outcomes[i] is that of unused.returns[i]) and wakes the callers
        waiting for the cache."""
        def back(k: int) -> bool:
            o = outcomes[k]
            # A refusal with Max already at `last` is a retried copy of a
            # return that applied (its reply was lost).
            return isinstance(o, _ReturnResult) and (
                o.applied or o.max == unused.returns[k][1])

        # A pair's tail comes back only after the range above it did.
        tail_back = unused.pair and back(1)
        lines = []
        with self._cond:
            for k, (issued, last) in enumerate(unused.returns):
                o = outcomes[k]
                # Whatever the answer, this range is never used again, so
                # its numbers above `last` are no longer held: the mark goes
                # down to the last number handed out from it, or, for a
                # range back whole, to what it was before the range was
                # taken (other clients' returns may since have moved Max
                # below low - 1; a return of unknown outcome may have
                # applied). In order: a pair's later range first lowers the
                # mark to the earlier range's high, then its tail below.
                if self._held.get(issued.node_tag) == issued.high:
                    self._held[issued.node_tag] = (
                        issued.held_before if last == issued.low - 1
                        else last)
                if back(k) or (k == 0 and tail_back):
                    self._applied += 1
                elif isinstance(o, HiloError):
                    self._failed += 1
                    self._count_error(o)
                    lines.append(
                        f"hilo: returning numbers {last + 1}-{issued.high} of "
                        f"collection {self._collection!r} failed: {o}")
                else:
                    self._refused += 1
            self._busy = False
            self._calls += 1
            self._error = None
            self._cond.notify_all()
        for line in lines:
            self._log(line)

    def add_stats_to(self, stats: Dict[str, object]) -> None:
        with self._cond:
            stats["calls_waited"] += self._waited
            stats["ranges_fetched"] += self._fetched
            stats["ranges_prefetched"] += self._prefetched
            stats["returns_applied"] += self._applied
            stats["returns_refused"] += self._refused
            stats["returns_failed"] += self._failed
            for code, n in self._errors.items():
                stats["errors"][code] = stats["errors"].get(code, 0) + n


class Client:
    """Document IDs from hilo servers; see the module docstring.

    targets: server addresses in gRPC target syntax ("host:port",
        "dns:///name:port"), at least one. On UNAVAILABLE or
        DEADLINE_EXCEEDED the client tries the next, and stays with the one
        that answered.
    separator: between collection and number in a document ID; one
        character, anything but '|' (reserved), a digit or '-' (those raise
        HiloError with INVALID_ARGUMENT, also a ValueError: a digit could be
        read as part of the number, so two IDs could be equal, and with '-'
        the number could not be read back).
    rpc_deadline: seconds each NextRange attempt may take (each target is
        one attempt), and all attempts of one ReturnRange or ReturnRanges
        call together.
    prefetch_at: share of a range used before the next one is fetched in
        the background, so callers switch ranges without waiting on the
        network; 0 turns prefetching off, otherwise in (0, 1). Default 0.2,
        as the C++ client.
    credentials: grpc.ChannelCredentials for every target; None means
        plaintext.
    log: receives best-effort failures (such as a return that failed on
        every attempt, or that the node refused with FAILED_PRECONDITION) as
        one line per range; None means the "hilo_client" logger at WARNING.

    Connecting is lazy, so creating a Client succeeds with no server running.
    Bad options raise ValueError.
    """

    def __init__(self, targets: Union[str, Sequence[str]], *,
                 separator: str = "/", rpc_deadline: float = 5.0,
                 prefetch_at: float = 0.2,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 log: Optional[Callable[[str], None]] = None):
        if isinstance(targets, str):
            targets = [targets]
        targets = list(targets)
        if not targets:
            raise ValueError("no server targets given")
        if any(not isinstance(t, str) or not t for t in targets):
            raise ValueError("a server target is empty")
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError("separator must be exactly one character")
        _check_separator(separator)
        if not rpc_deadline > 0:
            raise ValueError(
                f"rpc deadline is {rpc_deadline}; it must be positive")
        if (isinstance(prefetch_at, bool)
                or not isinstance(prefetch_at, (int, float))
                or not 0 <= prefetch_at < 1):
            raise ValueError(
                f"prefetch_at is {prefetch_at!r}; use 0 (off) or (0, 1)")
        channels = []
        for t in targets:
            channel = (grpc.secure_channel(t, credentials)
                       if credentials is not None else grpc.insecure_channel(t))
            channels.append(_Target(t, channel,
                                    hilo_pb2_grpc.HiLoStub(channel)))
        self._separator = separator
        self._log = log if log is not None else _logger.warning
        self._source = _GrpcRangeSource(channels, float(rpc_deadline))
        self._rpc_deadline = float(rpc_deadline)
        self._prefetch_at = float(prefetch_at)
        # Runs prefetch tasks; None when prefetching is off.
        self._prefetcher = _Prefetcher() if prefetch_at > 0 else None
        self._lock = threading.Lock()
        self._return_lock = threading.Lock()
        self._caches = {}  # collection -> _RangeCache; never shrinks
        self._closed = False

    def _cache_for(self, collection: str) -> _RangeCache:
        cache = self._caches.get(collection)
        if cache is not None:
            return cache
        with self._lock:
            if self._closed:
                raise RuntimeError("hilo client is closed")
            cache = self._caches.get(collection)
            if cache is None:
                prefetcher = self._prefetcher
                cache = _RangeCache(
                    collection, self._source, self._log, self._prefetch_at,
                    prefetcher.schedule if prefetcher is not None else None)
                self._caches[collection] = cache
            return cache

    def next_id(self, collection: str) -> Id:
        """The next number of `collection` and its node tag. Raises
        HiloError (see there); INTERNAL if a server replied with a range
        that breaks the contract (see the module docstring)."""
        if not isinstance(collection, str):
            raise TypeError(f"collection must be str, not "
                            f"{type(collection).__name__}")
        if self._closed:
            raise RuntimeError("hilo client is closed")
        try:
            collection.encode("utf-8")
        except UnicodeEncodeError as e:
            raise HiloError(grpc.StatusCode.INVALID_ARGUMENT,
                            f"collection name is not valid UTF-8: {e}") from None
        return self._cache_for(collection).next()

    def next_document_id(self, collection: str) -> str:
        """"collection<separator>number-tag", e.g. "orders/10-A". Raises as
        next_id."""
        number, tag = self.next_id(collection)
        return f"{collection}{self._separator}{number}-{tag}"

    def return_unused_ranges(self) -> None:
        """Hands the unused numbers of each collection back to the node that
        issued them, with each range's token, so the next client continues
        right after the last number this one handed out: a range fetched
        ahead goes back whole, then the unused tail of the current range;
        when the two are adjacent ranges of one node they go in the same
        ReturnRanges call, the later range first, so that no other client's
        NextRange can come between them and make the tail's return refused.
        Every collection goes back at once, in ReturnRanges calls of up to
        1000 ranges per node; to a node older than ReturnRanges, one
        ReturnRange per range, in the same order. Best effort within the RPC
        deadline per call (a call that failed with UNAVAILABLE or
        DEADLINE_EXCEEDED is tried again on that node; see the module
        docstring): failures are logged, never raised, and a refused return
        (the node has issued a later range, or already took this one back)
        is normal and silent. The client stays usable; the next next_id
        fetches a new range. next_id calls on these collections wait until
        the call ends."""
        with self._return_lock:  # one at a time, as the C++ client
            with self._lock:
                caches = list(self._caches.values())
            taken: List[Tuple[_RangeCache, _Unused, int]] = []
            items: List[_ReturnItem] = []
            outcomes: List[Union[_ReturnResult, HiloError]] = []
            try:
                for cache in caches:
                    unused = cache.take_unused()
                    if unused is None:
                        continue
                    taken.append((cache, unused, len(items)))
                    for k, (issued, last) in enumerate(unused.returns):
                        items.append(_ReturnItem(cache.collection, issued,
                                                 last, unused.pair and k == 0))
                if items:
                    outcomes = self._source.return_many(items)
            finally:
                # Every taken cache ends its return, so no caller waits for
                # ever, even if return_many raised.
                missing = HiloError(grpc.StatusCode.INTERNAL, "no outcome")
                for cache, unused, first in taken:
                    cache.end_return(unused, [
                        outcomes[first + k] if first + k < len(outcomes)
                        else missing for k in range(len(unused.returns))])

    def stats(self) -> ClientStats:
        """The counters so far, summed over every collection (see
        ClientStats)."""
        totals: Dict[str, object] = {
            "calls_waited": 0, "ranges_fetched": 0, "ranges_prefetched": 0,
            "returns_applied": 0, "returns_refused": 0, "returns_failed": 0,
            "errors": {}}
        with self._lock:
            caches = list(self._caches.values())
        for cache in caches:
            cache.add_stats_to(totals)
        return ClientStats(failovers=self._source.failovers, **totals)

    def close(self) -> None:
        """Stops fetching ahead, returns the unused ranges, then closes the
        channels. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._prefetcher is not None:
            # A running prefetch ends within its NextRange deadlines; what
            # it fetched goes back below.
            self._prefetcher.stop(
                self._rpc_deadline * len(self._source._targets) + 1)
        self.return_unused_ranges()
        self._source.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
