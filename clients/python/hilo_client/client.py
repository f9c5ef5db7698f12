"""hilo_client.Client: document IDs from a hilo service, without a round trip
per ID. The Python counterpart of the C++ hilo::Client
(client_cpp/include/hilo/client.h).

The client keeps one range of numbers per collection, obtained from a hilo
server with NextRange, and hands its numbers out locally. Each number keeps
the tag of the node that issued its range, so IDs stay unique across nodes::

    with hilo_client.Client(["hilo-0.hilo:50051", "hilo-1.hilo:50051"]) as c:
        c.next_document_id("orders")   # "orders/1-A"

A Client is safe for concurrent use by many threads. While a collection's
range lasts, next_id takes one short lock; when the range runs dry, exactly
one caller asks a server for the next one and the other callers of that
collection wait for it. Ranges grow while a collection is busy (the client
reports its previous range with each request) and never move down.

close() (or leaving a ``with`` block) hands the unused tail of every range
back to the node that issued it, so the next client continues there: all
collections at once, in ReturnRanges calls of up to 1000 ranges per node (one
ReturnRange per range to a node older than ReturnRanges). Nothing is
returned from a destructor: call close().

Each range comes with a range_token, a random secret of the node that issued
it. The client keeps it with the range and sends it with the range's return;
the node applies a tokened return at most once (and only for the range it
issued last), so the client retries a call that failed with UNAVAILABLE or
DEADLINE_EXCEEDED, on the same node, within one RPC deadline. A call holding
a range without a token is sent once.
A client holds one range per collection at a time (it fetches nothing
ahead), so it never has two adjacent ranges to hand back.

Replies that break the contract are refused with INTERNAL: a range that is
empty or starts below 1, and a node tag that is not 1-4 characters of A-Z
and 0-9 (IDs built with it could collide or fail to parse).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import (Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import grpc

try:
    from hilo.v1 import hilo_pb2, hilo_pb2_grpc
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "hilo_client needs the generated Python stubs (module hilo.v1): run "
        "scripts/gen-stubs.sh and put build/gen/python on PYTHONPATH") from e

__all__ = ["Client", "Id", "HiloError"]

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
    its deadline; INTERNAL for a reply that breaks the contract (an invalid
    range or node tag); otherwise the server's code."""

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


class _Target(NamedTuple):
    name: str
    channel: grpc.Channel
    stub: hilo_pb2_grpc.HiLoStub


class _ReturnResult(NamedTuple):
    """A return the node judged: applied, or refused (which is normal)."""

    applied: bool
    max: int


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

    def next(self, collection: str, previous: _Previous) -> _Issued:
        request = hilo_pb2.NextRangeRequest(
            collection=collection, last_size=previous.size,
            last_max=previous.max)
        if previous.range_at is not None:
            request.last_range_at.CopyFrom(previous.range_at)
        failures = []
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
            if response.low < 1 or response.high < response.low:
                raise HiloError(
                    grpc.StatusCode.INTERNAL,
                    f"{target.name}: NextRange replied with an invalid range "
                    f"[{response.low}, {response.high}]")
            if not _NODE_TAG.fullmatch(response.node_tag):
                raise HiloError(
                    grpc.StatusCode.INTERNAL,
                    f"{target.name}: NextRange replied with node tag "
                    f"{response.node_tag!r}; a tag is 1-4 characters of A-Z "
                    f"and 0-9")
            self._preferred = index
            return _Issued(response.low, response.high, response.node_tag,
                           response.range_at, index, response.range_token)
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

    def return_many(self, items: Sequence[Tuple[str, _Issued, int]]
                    ) -> List[Union[_ReturnResult, HiloError]]:
        """Hands back many tails at once: items are (collection, issued,
        last) as for return_, and the outcome of each, in order, is a
        _ReturnResult or the HiloError that item failed with.

        Each target's items go as ReturnRanges calls of at most
        _MAX_BATCH_ITEMS items and _MAX_BATCH_BYTES bytes (the server takes
        1000 items and 64 KiB), up to _BATCH_THREADS calls at once. A batch
        is retried as return_ retries one return, but only if every item has
        a token (the tokens make a retry of an applied batch refused, never
        applied twice). A target that answers UNIMPLEMENTED (older than
        ReturnRanges; nothing of the batch was applied) gets this batch and
        all later ones as single ReturnRange calls."""
        results: List[Union[_ReturnResult, HiloError]] = [
            HiloError(grpc.StatusCode.UNKNOWN, "not sent")] * len(items)
        batches: List[_Batch] = []
        open_batch = {}  # target index -> index into batches
        for i, (collection, issued, last) in enumerate(items):
            request = _return_request(collection, issued, last)
            # The item, its field tag and its length.
            size = request.ByteSize() + 4
            b = open_batch.get(issued.source)
            if (b is None or len(batches[b].items) >= _MAX_BATCH_ITEMS
                    or batches[b].bytes + size > _MAX_BATCH_BYTES):
                b = open_batch[issued.source] = len(batches)
                batches.append(_Batch(issued.source, [],
                                      hilo_pb2.ReturnRangesRequest(), 0))
            batch = batches[b]
            batch.items.append(i)
            batch.request.returns.append(request)
            batch.bytes += size

        def send(batch: _Batch) -> None:
            target = self._targets[batch.target]
            if not self._no_batches[batch.target]:
                all_tokens = all(items[i][1].token != 0 for i in batch.items)
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
            # One by one, as to a server without batches.
            for i in batch.items:
                try:
                    r = self.return_(*items[i])
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


class _RangeCache:
    """One collection's current range, handed out number by number. Exactly
    one caller at a time talks to the server for it (fetch or return); the
    others wait. A number leaves only together with its range's tag."""

    def __init__(self, collection: str, source: _GrpcRangeSource,
                 log: Callable[[str], None]):
        self._collection = collection
        self._source = source
        self._log = log
        self._cond = threading.Condition(threading.Lock())
        self._range: Optional[_Issued] = None
        self._next = 0  # next number of _range to hand out
        self._busy = False  # a fetch or return is in flight
        self._calls = 0  # completed or failed fetches and returns
        self._error: Optional[HiloError] = None  # of the last fetch
        self._previous = _Previous()

    def next(self) -> Id:
        with self._cond:
            while True:
                r = self._range
                if r is not None and self._next <= r.high:
                    number = self._next
                    self._next += 1
                    return Id(number, r.node_tag)
                if not self._busy:
                    break
                calls = self._calls
                self._cond.wait_for(lambda: self._calls != calls)
                if self._error is not None and (
                        self._range is None or self._next > self._range.high):
                    # The fetch this caller waited for failed: share its error
                    # rather than have every waiter try again at once.
                    raise HiloError(self._error.code, self._error.message)
            # This caller fetches; callers arriving meanwhile wait above.
            self._busy = True
            previous = self._previous
        try:
            issued = self._source.next(self._collection, previous)
        except BaseException as e:
            with self._cond:
                self._busy = False
                self._calls += 1
                self._error = e if isinstance(e, HiloError) else None
                self._cond.notify_all()
            raise
        with self._cond:
            self._busy = False
            self._calls += 1
            self._error = None
            self._range = issued
            self._next = issued.low + 1  # this caller takes the first number
            self._previous = _Previous(issued.high - issued.low + 1,
                                       issued.range_at, issued.high)
            self._cond.notify_all()
        return Id(issued.low, issued.node_tag)

    @property
    def collection(self) -> str:
        return self._collection

    def take_unused(self) -> Optional[Tuple[_Issued, int]]:
        """Retires the current range and, if numbers of it are left, marks
        the cache busy and returns (range, last number used) for the caller
        to hand back; end_return must follow. None if nothing is left."""
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)
            r = self._range
            if r is None:
                return None
            # Retire the range first: from here on no caller takes its numbers.
            self._range = None
            if self._next > r.high:
                return None  # nothing left
            last = self._next - 1  # low - 1 if none was used
            self._busy = True
            return r, last

    def end_return(self, issued: _Issued, last: int,
                   outcome: Union[_ReturnResult, HiloError]) -> None:
        """Ends the return take_unused began: logs a failure, and wakes the
        callers waiting for the cache."""
        if isinstance(outcome, HiloError):
            self._log(
                f"hilo: returning numbers {last + 1}-{issued.high} of "
                f"collection {self._collection!r} failed: {outcome}")
        with self._cond:
            self._busy = False
            self._calls += 1
            self._error = None
            if isinstance(outcome, _ReturnResult) and outcome.applied:
                # Our next range may start right after the numbers we used.
                self._previous = self._previous._replace(max=last)
            self._cond.notify_all()


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
        channels = []
        for t in targets:
            channel = (grpc.secure_channel(t, credentials)
                       if credentials is not None else grpc.insecure_channel(t))
            channels.append(_Target(t, channel,
                                    hilo_pb2_grpc.HiLoStub(channel)))
        self._separator = separator
        self._log = log if log is not None else _logger.warning
        self._source = _GrpcRangeSource(channels, float(rpc_deadline))
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
                cache = _RangeCache(collection, self._source, self._log)
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
        """Hands the unused tail of each collection's range back to the node
        that issued it, with the range's token, so the next client continues
        there. Every collection goes back at once, in ReturnRanges calls of
        up to 1000 ranges per node; to a node older than ReturnRanges, one
        ReturnRange per range. Best effort within the RPC deadline per call
        (a call that failed with UNAVAILABLE or DEADLINE_EXCEEDED is tried
        again on that node; see the module docstring): failures are logged,
        never raised, and a refused return (the node has issued a later
        range, or already took this one back) is normal and silent. The
        client stays usable; the next next_id fetches a new range. next_id
        calls on these collections wait until the call ends."""
        with self._return_lock:  # one at a time, as the C++ client
            with self._lock:
                caches = list(self._caches.values())
            taken = []  # (cache, range, last)
            outcomes: List[Union[_ReturnResult, HiloError]] = []
            try:
                for cache in caches:
                    unused = cache.take_unused()
                    if unused is not None:
                        taken.append((cache, *unused))
                if taken:
                    outcomes = self._source.return_many(
                        [(c.collection, r, last) for c, r, last in taken])
            finally:
                # Every taken cache ends its return, so no caller waits for
                # ever, even if return_many raised.
                for k, (cache, r, last) in enumerate(taken):
                    cache.end_return(
                        r, last, outcomes[k] if k < len(outcomes) else
                        HiloError(grpc.StatusCode.INTERNAL, "no outcome"))

    def close(self) -> None:
        """Returns the unused ranges, then closes the channels. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.return_unused_ranges()
        self._source.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
