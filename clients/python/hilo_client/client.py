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
back to the node that issued it, so the next client continues there. Nothing
is returned from a destructor: call close().

Each range comes with a range_token, a random secret of the node that issued
it. The client keeps it with the range and sends it with the range's
ReturnRange; the node applies a tokened return at most once (and only for
the range it issued last), so the client retries a return that failed with
UNAVAILABLE or DEADLINE_EXCEEDED, on the same node, within one RPC deadline.
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
from typing import Callable, List, NamedTuple, Optional, Sequence, Union

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


class _GrpcRangeSource:
    """Talks to the targets: NextRange with fail-over, ReturnRange (with the
    range's token, retried on UNAVAILABLE or DEADLINE_EXCEEDED) to the
    target that issued the range. Thread-safe."""

    def __init__(self, targets: List[_Target], rpc_deadline: float):
        self._targets = targets
        self._deadline = rpc_deadline
        self._preferred = 0  # an int store is atomic under the GIL

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
        request = hilo_pb2.ReturnRangeRequest(
            collection=collection, end=issued.high, last=last,
            node_tag=issued.node_tag, range_token=issued.token)
        attempts = _RETURN_ATTEMPTS if issued.token != 0 else 1
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
                return target.stub.ReturnRange(
                    request, timeout=left / (attempts - attempt))
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
            code, f"{target.name}: ReturnRange failed {failures} time(s) "
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

    def return_unused(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)
            r = self._range
            if r is None:
                return
            # Retire the range first: from here on no caller takes its numbers.
            self._range = None
            if self._next > r.high:
                return  # nothing left
            last = self._next - 1  # low - 1 if none was used
            self._busy = True
        response = None
        try:
            response = self._source.return_(self._collection, r, last)
        except HiloError as e:
            self._log(
                f"hilo: returning numbers {last + 1}-{r.high} of collection "
                f"{self._collection!r} failed: {e}")
        finally:
            with self._cond:
                self._busy = False
                self._calls += 1
                self._error = None
                if response is not None and response.applied:
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
        character, anything but '|'.
    rpc_deadline: seconds each NextRange attempt may take (each target is
        one attempt), and all attempts of one ReturnRange together.
    credentials: grpc.ChannelCredentials for every target; None means
        plaintext.
    log: receives best-effort failures (such as a ReturnRange that failed
        on every attempt, or that the node refused with FAILED_PRECONDITION)
        as one line; None means the "hilo_client" logger at WARNING.

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
        if separator == "|":
            raise ValueError(
                "separator '|' is reserved; use any other character")
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
        there. Best effort within the RPC deadline per collection (a return
        that failed with UNAVAILABLE or DEADLINE_EXCEEDED is tried again on
        that node; see the module docstring): failures are logged, never
        raised, and a refused return (the node has issued a later range, or
        already took this one back) is normal and silent. The client stays
        usable; the next next_id fetches a new range."""
        with self._lock:
            caches = list(self._caches.values())
        for cache in caches:
            cache.return_unused()

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
