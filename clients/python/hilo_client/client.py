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

import logging
import os
import threading
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import grpc

from hilo_client._prefetcher import _Prefetcher
from hilo_client._range_cache import _Forgotten, _RangeCache, _Unused
from hilo_client._transport import (_GrpcRangeSource, _ReturnItem,
                                    _ReturnResult, _Target, hilo_pb2_grpc)
from hilo_client._values import ClientStats, HiloError, Id, _ClosedError

__all__ = ["Client", "ClientStats", "Id", "HiloError"]

_logger = logging.getLogger("hilo_client")

# An ID service sits under every insert: come back within a second of a
# server's return, not after gRPC's back-off of up to 2 minutes (CONTRACT.md
# R18). Not grpc.min_reconnect_backoff_ms: gRPC also takes it as the connect
# timeout, which would cut a slow handshake short.
_CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000))

# Every live Client, for the fork handler below (weak: a dropped client
# leaves by itself).
_live_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _release(prefetcher, source) -> None:
    if prefetcher is not None:
        prefetcher.stop(0)
    source.close()


def _after_fork_in_child() -> None:
    """A forked child (multiprocessing's fork start method, gunicorn
    --preload, uWSGI) drops every range it inherited, hands none back and
    fetches its own through channels of its own (CONTRACT.md R16)."""
    for client in list(_live_clients):
        client._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _OptionError(HiloError, ValueError):
    """A bad option: a HiloError with INVALID_ARGUMENT, and a ValueError as
    every bad option of the constructor is."""

    def __init__(self, message: str):
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message)


def _zero_stats() -> Dict[str, object]:
    """ClientStats' fields but failovers, as _RangeCache.add_stats_to adds
    to them."""
    return {"calls_waited": 0, "ranges_fetched": 0, "ranges_prefetched": 0,
            "returns_applied": 0, "returns_refused": 0, "returns_failed": 0,
            "errors": {}, "runway": {}}


def _add_stats(counts: Dict[str, object], totals: Dict[str, object]) -> None:
    """Adds the counters of `counts` (no runway) to `totals`."""
    for key, value in counts.items():
        if key == "errors":
            for code, n in value.items():
                totals["errors"][code] = totals["errors"].get(code, 0) + n
        elif key != "runway":
            totals[key] += value


_NAME_RULE = ("a collection is 1-256 bytes of UTF-8 without control "
              "characters")


def _check_collection_name(collection: str) -> None:
    """Raises HiloError INVALID_ARGUMENT unless `collection` is a name a
    node takes (CONTRACT.md R19): 1 to 256 bytes of UTF-8 (a string with
    an unpaired surrogate has none) without control characters (U+0000 to
    U+001F, U+007F to U+009F)."""
    if len(collection) > 256:  # over 256 bytes whatever it holds
        raise HiloError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"collection name is {len(collection)} characters; {_NAME_RULE}")
    try:
        size = len(collection.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise HiloError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"collection name {collection!r} is not valid UTF-8 ({e.reason} "
            f"at character {e.start}); {_NAME_RULE}") from None
    if not 1 <= size <= 256:
        raise HiloError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"collection name is {size} bytes; {_NAME_RULE}")
    for i, ch in enumerate(collection):
        if ch < "\x20" or "\x7f" <= ch <= "\x9f":
            raise HiloError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"collection name {collection!r} has control character "
                f"U+{ord(ch):04X} at character {i}; {_NAME_RULE}")


def _check_separator(separator: str) -> None:
    """Raises _OptionError for a separator that IDs cannot keep apart.

    An ID is read from its end: the tag follows the last '-' (a tag has no
    '-'), the number is the digits before it (a number has no sign), and the
    separator is the character right before those digits. A digit there
    could be read as part of the number, so two IDs could be equal; with
    '-' the last separator and the last '-' are the same character, so the
    number could not be read back. Any other character is safe, but for
    control characters (C0, DEL, C1): a document ID holds none (a NUL cuts
    it short in C strings and many stores)."""
    code = ord(separator)
    if code < 0x20 or 0x7f <= code <= 0x9f:
        raise _OptionError(
            f"separator U+{code:04X} is a control character; a document ID "
            f"holds none (a NUL would cut it short in C strings and many "
            f"stores); use any other character but '|', a digit or '-'")
    if 0xD800 <= code <= 0xDFFF:
        raise _OptionError(
            f"separator U+{code:04X} is half a surrogate pair, not a "
            f"character; it cannot be sent as UTF-8")
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


def _plain_name(collection: str) -> str:
    """`collection`, of a str subclass, as a plain str with its characters:
    a subclass may redefine hashing, comparison, encoding or formatting,
    and a name must find its cache, be checked and appear in an ID by its
    characters alone. TypeError for anything that is not a str."""
    if not isinstance(collection, str):
        raise TypeError(f"collection must be str, not "
                        f"{type(collection).__name__}")
    return str.__str__(collection)


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
        self._targets = targets
        self._credentials = credentials
        self._separator = separator
        self._log = log if log is not None else _logger.warning
        self._source = self._make_source(float(rpc_deadline))
        self._rpc_deadline = float(rpc_deadline)
        # How long a fetch may take (each target once, and again without
        # the echo if it refuses it, CONTRACT.md R17, each call within its
        # deadline): what close() gives a running prefetch, and the lease
        # of a collection's claim (_RangeCache).
        self._fetch_bound = self._rpc_deadline * 2 * len(targets) + 1
        self._prefetch_at = float(prefetch_at)
        # Runs prefetch tasks; None when prefetching is off.
        self._prefetcher = _Prefetcher() if prefetch_at > 0 else None
        self._lock = threading.Lock()
        self._return_lock = threading.Lock()
        # collection -> _RangeCache; a collection that never received a
        # range is forgotten after its fetch fails (next_id), and its
        # counters kept in _forgotten_stats.
        self._caches: Dict[str, _RangeCache] = {}
        self._forgotten_stats = _zero_stats()
        self._closed = False
        self._close_done = threading.Event()
        # A client dropped without close() still stops its prefetch thread
        # and closes its channels (it hands nothing back: only close() does).
        self._finalizer = weakref.finalize(
            self, _release, self._prefetcher, self._source)
        _live_clients.add(self)

    def _make_source(self, rpc_deadline: float) -> _GrpcRangeSource:
        targets = []
        for t in self._targets:
            channel = (grpc.secure_channel(t, self._credentials,
                                           options=_CHANNEL_OPTIONS)
                       if self._credentials is not None
                       else grpc.insecure_channel(t,
                                                  options=_CHANNEL_OPTIONS))
            targets.append(_Target(t, channel,
                                   hilo_pb2_grpc.HiLoStub(channel)))
        return _GrpcRangeSource(targets, rpc_deadline)

    def _after_fork_in_child(self) -> None:
        """In a forked child, with this thread the only one: every range
        inherited is dropped without a return (they are the parent's: a
        return would let a third client take numbers the parent still hands
        out), the locks are made anew (a thread that held one is gone), and
        so are the prefetch thread and the channels (a gRPC channel does not
        survive fork(); the parent's are left alone, never closed here)."""
        self._lock = threading.Lock()
        self._return_lock = threading.Lock()
        if self._prefetcher is not None:
            self._prefetcher = _Prefetcher()
        if not self._closed:
            self._source = self._make_source(self._rpc_deadline)
            self._finalizer.detach()  # it would close the parent's channels
            self._finalizer = weakref.finalize(
                self, _release, self._prefetcher, self._source)
        schedule = (self._prefetcher.schedule
                    if self._prefetcher is not None else None)
        for cache in self._caches.values():
            cache.drop_after_fork(self._source, schedule)

    def _cache_for(self, collection: str) -> _RangeCache:
        cache = self._caches.get(collection)
        if cache is not None:
            return cache
        # Checked once per collection, before anything is kept for it: a
        # name that has a cache is valid.
        _check_collection_name(collection)
        with self._lock:
            if self._closed:
                raise _ClosedError(collection)
            cache = self._caches.get(collection)
            if cache is None:
                prefetcher = self._prefetcher
                cache = _RangeCache(
                    collection, self._source, self._log, self._prefetch_at,
                    prefetcher.schedule if prefetcher is not None else None,
                    lease=self._fetch_bound)
                self._caches[collection] = cache
            return cache

    def next_id(self, collection: str) -> Id:
        """The next number of `collection` and its node tag. Raises
        HiloError (see there); INTERNAL if a server replied with a range
        that breaks the contract (see the module docstring)."""
        if type(collection) is not str:
            collection = _plain_name(collection)
        if self._closed:
            raise _ClosedError(collection)
        while True:
            cache = self._cache_for(collection)
            try:
                return cache.next()
            except _Forgotten:
                # Forgotten by another caller, which may not have dropped it
                # yet: drop it (once), and look the collection up again.
                self._forget(collection, cache)
                continue
            except HiloError:
                if cache.forget_if_unused():
                    self._forget(collection, cache)
                raise

    def _forget(self, collection: str, cache: _RangeCache) -> None:
        """Drops `cache`, which forget_if_unused closed, keeping its
        counters; once, whoever calls first."""
        with self._lock:
            if self._caches.get(collection) is cache:
                del self._caches[collection]
                cache.add_stats_to(self._forgotten_stats)

    def next_document_id(self, collection: str) -> str:
        """"collection<separator>number-tag", e.g. "orders/10-A". Raises as
        next_id."""
        if type(collection) is not str:
            collection = _plain_name(collection)
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
        the call ends (see close() for a call that never ends)."""
        self._return_unused(final=False)

    def _return_unused(self, final: bool) -> None:
        """return_unused_ranges; with final (close), each cache refuses
        numbers and fetches from then on, so that a next_id racing close
        neither raises from a closed channel nor fetches a range that is
        never handed back."""
        with self._return_lock:  # one at a time, as the C++ client
            with self._lock:
                caches = list(self._caches.values())
            taken: List[Tuple[_RangeCache, _Unused, int]] = []
            items: List[_ReturnItem] = []
            outcomes: List[Union[_ReturnResult, HiloError]] = []
            try:
                for cache in caches:
                    first = len(items)
                    unused = cache.take_unused(final)
                    if unused is None:
                        continue
                    # Nothing that could raise between the claim and this
                    # append: the `finally` below ends every claim taken.
                    taken.append((cache, unused, first))
                    for k, (issued, last) in enumerate(unused.returns):
                        items.append(_ReturnItem(cache.collection, issued,
                                                 last, unused.pair and k == 0))
                if items:
                    # The longest the calls may take, were every item one
                    # call of one deadline (a node without ReturnRanges),
                    # counted from now: taking the later claims may have
                    # waited.
                    bound = self._rpc_deadline * (len(items) + 1) + 1
                    for cache, unused, _ in taken:
                        cache.renew_claim(unused.claim, bound)
                    outcomes = self._source.return_many(items)
            finally:
                # Every taken cache ends its return, so no caller waits for
                # it, even if return_many raised.
                for cache, unused, first in taken:
                    cache.end_return(unused, outcomes, first)

    def stats(self) -> ClientStats:
        """The counters so far, summed over every collection, and each
        collection's runway (see ClientStats)."""
        totals = _zero_stats()
        with self._lock:
            caches = list(self._caches.values())
            _add_stats(self._forgotten_stats, totals)
        for cache in caches:
            cache.add_stats_to(totals)
        return ClientStats(failovers=self._source.failovers, **totals)

    def close(self) -> None:
        """Stops fetching ahead, returns the unused ranges, then closes the
        channels. Idempotent: a second close() waits (bounded) for the
        first to end. next_id calls racing close() either get a number
        whose range goes back with the rest, or HiloError
        FAILED_PRECONDITION, as every call after close() does.

        Nothing here or in next_id waits for ever on a call a caller left
        behind: a fetch or return whose caller was interrupted (Ctrl-C
        raising KeyboardInterrupt, a Jupyter interrupt) where it could not
        end it is given up once it has run longer than it could (a fetch:
        twice rpc_deadline per target, plus 1 s), and a line is logged."""
        with self._lock:
            first = not self._closed
            self._closed = True
        bound = self._rpc_deadline * (len(self._targets) + 2) + 1
        if not first:
            self._close_done.wait(bound)
            return
        try:
            if self._prefetcher is not None:
                # A running prefetch ends within its NextRange deadlines;
                # what it fetched goes back below.
                self._prefetcher.stop(self._fetch_bound)
            self._return_unused(final=True)
            self._source.close()
        finally:
            self._finalizer.detach()
            self._close_done.set()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
