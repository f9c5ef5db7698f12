"""_RangeCache: one collection's ranges inside a client (the current range,
the one fetched ahead, the numbers held per node for CONTRACT.md R11, the
counters), and what it hands back at close (_Unused). Private to
hilo_client."""

from __future__ import annotations

import math
import threading
import time
from typing import (Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import grpc

from hilo_client._held import HeldNumbers
from hilo_client._transport import (_GrpcRangeSource, _Issued, _Previous,
                                    _ReturnResult)
from hilo_client._values import HiloError, Id, _ClosedError


# The outcome of a return that return_many did not report.
_NO_OUTCOME = HiloError(grpc.StatusCode.INTERNAL, "no outcome")

# Builds an Id in C: the __new__ NamedTuple generates for Id is Python code
# and takes about as long as the rest of _take.
_make_id = tuple.__new__


# How many turns _let_holder_run gives a lock's holder.
_HOLDER_TURNS = 100

# How long a caller waiting for a claim to end sleeps at most before it
# looks again, woken or not.
_RECHECK_SECONDS = 1.0


def _let_holder_run(lock: threading.Lock) -> None:
    """Returns once `lock`, which another thread holds, is free, or after
    _HOLDER_TURNS turns given to the other threads (time.sleep(0) releases
    the GIL), so that the caller's `with lock` seldom sleeps on it. Under
    the GIL a thread that sleeps on a held lock wakes owning it but without
    the GIL; the thread that has the GIL then finds the lock taken at its
    next call and sleeps on it in turn, and from then on two threads
    drawing IDs hand the lock and the GIL to each other through the kernel
    at every call (a lock convoy: 2.7x the time per call, a context switch
    every 16 calls)."""
    for _ in range(_HOLDER_TURNS):
        time.sleep(0)
        if not lock.locked():
            return


class _Forgotten(Exception):
    """Raised by next() of a cache the client has forgotten
    (forget_if_unused): the caller looks the collection up again."""


class _Unused(NamedTuple):
    """What a cache hands back: (range, last) pairs in the order they must
    reach their nodes; pair when they are two adjacent ranges of one node
    (the later one whole first), which go in one call; the claim the return
    holds, which end_return ends."""

    returns: List[Tuple[_Issued, int]]
    pair: bool
    claim: int


class _RangeCache:
    """One collection's current range, handed out number by number, and the
    next range once it is fetched ahead. Exactly one caller at a time talks
    to the server for it (fetch, prefetch or return): it holds the
    collection's claim, and the others wait for the claim to end. A number
    leaves only together with its own range's tag.

    A claim is a lease of `lease` seconds (the client gives the longest a
    fetch may take; a return's claim is renewed for the longest the return
    may take). Its holder ends it however its call ends, exceptions
    included; but Python may raise an exception (KeyboardInterrupt from
    Ctrl-C, a Jupyter interrupt) at points no `try` can cover, such as in a
    `finally` already running, so a claim older than its lease is dropped
    and logged and the next caller goes on without it: no caller, close()
    included, waits for ever. A range fetched under a claim that was dropped
    meanwhile is never used nor handed back (the claims made since were
    checked against the numbers held without it, so it could repeat
    theirs, CONTRACT.md R11), only kept among the numbers held; its caller
    waits or fetches again. A return whose claim was dropped was of
    numbers retired before it began, which no range in use can hold (each
    was checked against them)."""

    # Slots: with more than 30 attributes an instance's dict stops sharing
    # its keys (CPython 3.11), and every attribute read on next()'s fast
    # path got slower (535 against 571 ns per next_id).
    __slots__ = (
        "_ahead", "_applied", "_calls", "_claim", "_claim_lease",
        "_claimed_at", "_claims", "_clock", "_closed", "_collection", "_cond",
        "_dropped", "_error", "_errors", "_failed", "_fetched", "_forgotten",
        "_held", "_in_flight", "_lease", "_lock", "_log", "_next",
        "_prefetch_at", "_prefetch_number", "_prefetched", "_previous",
        "_range", "_refused", "_schedule", "_source", "_used", "_used_since",
        "_waited", "_waiters", "_window_start", "_window_taken_before",)

    def __init__(self, collection: str, source: _GrpcRangeSource,
                 log: Callable[[str], None], prefetch_at: float,
                 schedule: Optional[Callable[[Callable[[], None]], None]],
                 clock: Callable[[], float] = time.monotonic,
                 lease: float = 10.0):
        self._collection = collection
        self._source = source
        self._log = log
        self._prefetch_at = prefetch_at if schedule is not None else 0.0
        self._schedule = schedule
        # Blocks take _lock with `with`, never `with self._cond`:
        # Condition.__enter__ is Python code, so an exception arriving
        # (Ctrl-C) after it took the lock and before the block began would
        # leave the lock held; it also doubles the fast path's cost.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._range: Optional[_Issued] = None
        self._next = 0  # next number of _range to hand out
        # Taking this number of _range asks for the next range ahead.
        self._prefetch_number: Optional[int] = None
        self._ahead: Optional[_Issued] = None  # fetched ahead, not yet used
        # The claim in force (0: none) and when it began, on _clock;
        # claims are numbered from 1 (_claims: the last one's number).
        self._claim = 0
        self._claimed_at = 0.0
        self._claim_lease = lease
        self._claims = 0
        self._lease = lease
        # Claims begun whose holder has not finished its call yet, dropped
        # ones included, and callers waiting for a claim to end: a cache is
        # forgotten only with neither (forget_if_unused).
        self._in_flight = 0
        self._waiters = 0
        # A claim dropped by _claim_left, to be logged by the caller.
        self._dropped: Optional[str] = None
        self._calls = 0  # claims ended or dropped
        self._error: Optional[HiloError] = None  # of the last fetch
        self._previous = _Previous()
        # Per node tag: the highest number of this collection the client
        # holds or handed out from that node's ranges; after an applied
        # return, the last number it used. A new range of that node must
        # start above it (CONTRACT.md R11).
        self._held = HeldNumbers()
        # Per node tag: the highest number handed out from that node's
        # retired ranges (absent: none); one entry per tag seen.
        self._used: Dict[str, int] = {}
        # Set by take_unused(final=True): the client closed; no number is
        # handed out and no range fetched from then on. Also set, with
        # _forgotten, by forget_if_unused.
        self._closed = False
        self._forgotten = False
        # ClientStats counters, under _cond.
        self._waited = 0
        self._fetched = 0
        self._prefetched = 0
        self._applied = 0
        self._refused = 0
        self._failed = 0
        self._errors: Dict[grpc.StatusCode, int] = {}
        # The runway's window (add_stats_to), moved only by _use: it began
        # when the range before the current one came into use (the current
        # one, for the first), with the numbers taken of that earlier range.
        self._clock = clock
        self._used_since = 0.0
        self._window_start = 0.0
        self._window_taken_before = 0

    def _retire_current(self) -> None:
        """Notes what was handed out of the current range (with _cond
        held), which is about to be replaced or dropped."""
        r = self._range
        if r is not None and self._next > r.low:
            self._used[r.node_tag] = max(self._used.get(r.node_tag, 0),
                                         self._next - 1)

    def _use(self, issued: _Issued) -> None:
        """Makes `issued` the current range (with _cond held); the range it
        replaces was used up."""
        now = self._clock()
        if self._range is not None:
            self._retire_current()
            self._window_start = self._used_since
            self._window_taken_before = self._next - self._range.low
        else:
            self._window_start = now
            self._window_taken_before = 0
        self._used_since = now
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
        return _make_id(Id, (number, self._range.node_tag))

    def _count_error(self, e: HiloError) -> None:
        self._errors[e.code] = self._errors.get(e.code, 0) + 1

    def _claim_left(self) -> float:
        """Seconds left of the claim in force (with _cond held); 0 if there
        is none. One older than the lease is dropped, and noted in
        _dropped for the caller to log."""
        if self._claim == 0:
            return 0.0
        left = self._claimed_at + self._claim_lease - self._clock()
        if left > 0:
            return left
        self._claim = 0
        self._calls += 1
        self._dropped = (
            f"hilo: collection {self._collection!r}: a fetch or return "
            f"began {self._claim_lease:g} s ago and has not ended (its caller was "
            f"interrupted, or the call outlived its deadlines); going on "
            f"without it")
        self._cond.notify_all()
        return 0.0

    def _closed_error(self) -> Exception:
        """What next() raises once _closed is set (with _cond held)."""
        if self._forgotten:
            return _Forgotten()
        return _ClosedError(self._collection)

    def forget_if_unused(self) -> bool:
        """Closes the cache for good if it never received a range and no
        call is in flight or waiting (its fetches failed: a name the server
        refuses, say), so that the client can forget it and a caller naming
        many such collections does not grow the client; next() then raises
        _Forgotten. True if it did: its counters then stay as they are."""
        with self._lock:
            if (self._fetched != 0 or self._claim != 0 or self._closed
                    or self._in_flight != 0 or self._waiters != 0):
                return False
            self._closed = True
            self._forgotten = True
            self._cond.notify_all()  # waiters look the collection up again
            return True

    def _begin_claim(self) -> int:
        """Claims the collection (with _cond held, no claim in force); the
        claim's number, for _end_claim. Sets nothing before its last call,
        so an exception leaves either no claim or one its caller holds."""
        now = self._clock()
        self._claims += 1
        self._claim = self._claims
        self._claimed_at = now
        self._claim_lease = self._lease
        self._in_flight += 1
        # Waiters woken from now on wait for this call, not an older one's
        # error.
        self._error = None
        return self._claim

    def renew_claim(self, claim: int, lease: float) -> None:
        """Gives `claim`, if still in force, `lease` seconds from now (a
        return, before its calls: they may take longer than a fetch)."""
        with self._lock:
            if self._claim == claim:
                self._claimed_at = self._clock()
                self._claim_lease = lease

    def _end_claim(self, claim: int) -> None:
        """Ends `claim` and wakes the waiters (with _cond held), unless it
        was dropped meanwhile."""
        if self._claim == claim:
            self._claim = 0
            self._calls += 1
            self._cond.notify_all()

    def next(self) -> Id:
        lock = self._lock  # _cond's lock
        if lock.locked():
            _let_holder_run(lock)
        # The fast path calls nothing while it holds the lock, so the GIL
        # is not handed to another thread there (CPython hands it over at
        # calls and loops), and a thread that has the GIL finds the lock
        # free unless a slow path holds it. `with`, not acquire() and try:
        # an exception (Ctrl-C) arriving right after acquire() returned
        # would leave the lock held.
        with lock:
            r = self._range
            number = self._next
            fast = (r is not None and number <= r.high and not self._closed
                    and number != self._prefetch_number)
            if fast:
                self._next = number + 1
        if fast:
            return _make_id(Id, (number, r.node_tag))
        return self._next_slow()

    def _next_slow(self) -> Id:
        """next() for a caller that must wait, switch to the range fetched
        ahead, fetch, ask for a prefetch or be refused."""
        waited = False
        while True:
            # Set right when this caller claims the collection, inside the
            # `try`, so that the claim ends however the call does.
            claim = 0
            try:
                with self._lock:  # _cond's lock
                    taken, waited = self._number_or_turn(waited)
                    if taken is not None:
                        return taken
                    # This caller fetches; callers arriving meanwhile wait
                    # in _number_or_turn.
                    claim = self._begin_claim()
                    dropped, self._dropped = self._dropped, None
                    previous = self._previous
                    held = self._held.copy()
                if dropped is not None:
                    self._log(dropped)
                issued = self._source.next(self._collection, previous, held)
                with self._lock:
                    # Ends the claim with no call before `claim = 0`, so an
                    # exception arriving in between cannot end it twice.
                    mine = self._claim == claim
                    if mine:
                        self._claim = 0
                        self._calls += 1
                    self._in_flight -= 1
                    self._fetched += 1
                    claim = 0
                    self._cond.notify_all()
                    # The node issued it to this client, used or not.
                    self._held.add(issued.node_tag, issued.low, issued.high)
                    if self._closed:
                        # close() went on without this fetch (its claim was
                        # dropped): the range would never be handed back.
                        raise self._closed_error()
                    if mine:
                        self._waited += 1
                        self._use(issued)
                        self._previous = _Previous(
                            issued.high - issued.low + 1, issued.range_at,
                            issued.high)
                        return self._take()  # this caller takes the first
                # The claim was dropped: this range is not used (see the
                # class comment); look again.
                waited = True
            except BaseException as e:
                if claim != 0:
                    with self._lock:
                        self._in_flight -= 1
                        self._waited += 1
                        if isinstance(e, HiloError):
                            self._count_error(e)
                        if self._claim == claim:
                            self._error = (e if isinstance(e, HiloError)
                                           else None)
                        self._end_claim(claim)
                        closed = self._closed
                    if closed and isinstance(e, Exception) and not isinstance(
                            e, (_ClosedError, _Forgotten)):
                        # close() went on without this fetch and closed the
                        # channels under it.
                        raise self._closed_error() from None
                raise

    def _number_or_turn(self, waited: bool) -> Tuple[Optional[Id], bool]:
        """_next_slow's wait, with _cond held: (a number, waited) from the
        current range or the one fetched ahead, waiting while another
        caller's claim is in force; (None, waited) once this caller may
        claim the collection. `waited`: whether the call waited so far.
        Raises as next(), and a fetch's error to the callers that waited
        for it."""
        while True:
            if self._closed:
                raise self._closed_error()
            r = self._range
            if r is not None and self._next <= r.high:
                if waited:
                    self._waited += 1
                return self._take(), waited
            if self._ahead is not None:
                # The range fetched ahead takes over, no round trip.
                self._use(self._ahead)
                self._ahead = None
                continue
            left = self._claim_left()
            if left == 0:
                return None, waited
            waited = True
            calls = self._calls
            self._waiters += 1
            try:
                woken = self._cond.wait_for(lambda: self._calls != calls,
                                            min(left, _RECHECK_SECONDS))
            finally:
                self._waiters -= 1
            if not woken:
                continue  # look again, at the lease too
            if self._error is not None and self._ahead is None and (
                    self._range is None or self._next > self._range.high):
                # The fetch this caller waited for failed: share its error
                # rather than have every waiter try again at once.
                self._waited += 1
                raise HiloError(self._error.code, self._error.message)

    def prefetch(self) -> None:
        """Fetches the next range ahead of need, unless one is fetched or
        being fetched (or a return is in flight). Runs on the prefetch
        thread; a failure is left for the caller that runs dry, which
        fetches (and reports) by itself."""
        claim = 0  # as in _next_slow
        issued = None
        error: Optional[HiloError] = None
        try:
            with self._lock:
                if (self._claim_left() > 0 or self._closed
                        or self._ahead is not None or self._range is None):
                    return
                claim = self._begin_claim()
                dropped, self._dropped = self._dropped, None
                previous = self._previous
                held = self._held.copy()
            if dropped is not None:
                self._log(dropped)
            try:
                issued = self._source.next(self._collection, previous, held)
            except HiloError as e:
                error = e
            except Exception as e:  # noqa: BLE001 - a closed channel, say
                error = HiloError(grpc.StatusCode.UNKNOWN,
                                  f"prefetch of {self._collection!r}: {e}")
        finally:
            if claim != 0:
                with self._lock:
                    mine = self._claim == claim
                    self._in_flight -= 1
                    self._end_claim(claim)
                    if mine:
                        self._error = None  # not a caller's error
                    if issued is not None:
                        self._fetched += 1
                        self._held.add(issued.node_tag, issued.low,
                                       issued.high)
                        # Kept only if still wanted: otherwise (the claim
                        # was dropped meanwhile, or the client closed) it
                        # is never used, never handed back.
                        if mine and not self._closed and self._ahead is None:
                            self._ahead = issued
                            self._prefetched += 1
                            # The server has moved past this range whatever
                            # we do.
                            self._previous = _Previous(
                                issued.high - issued.low + 1,
                                issued.range_at, issued.high)
                    elif error is not None:
                        self._count_error(error)

    def drop_after_fork(
            self, source: _GrpcRangeSource,
            schedule: Optional[Callable[[Callable[[], None]], None]]) -> None:
        """In a forked child (the only thread): forgets the current range and
        the one fetched ahead without handing them back, and any fetch or
        return in flight on a thread the child does not have; from now on
        fetches go through `source` and prefetches to `schedule`. The next
        request still reports the parent's last range, so the child's first
        range starts above it."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._retire_current()
        self._range = None
        self._prefetch_number = None
        self._ahead = None
        self._claim = 0
        self._dropped = None
        self._in_flight = 0  # their threads are not in the child
        self._waiters = 0
        self._calls += 1
        self._error = None
        self._source = source
        self._schedule = schedule

    @property
    def collection(self) -> str:
        return self._collection

    def take_unused(self, final: bool = False) -> Optional[_Unused]:
        """Retires the current range and the one fetched ahead and, if
        numbers of them are left, claims the collection and says what to
        hand back: the range fetched ahead whole (last = low - 1), then the
        current range's unused tail. end_return must follow. None if nothing
        is left. With final (the client closes), every later next() raises
        and no range is fetched again, so none is left unreturned. Waits for
        the claim in force to end, at most its lease."""
        claim = 0
        try:
            with self._lock:
                while True:
                    left = self._claim_left()
                    if left == 0:
                        break
                    self._cond.wait(min(left, _RECHECK_SECONDS))
                dropped, self._dropped = self._dropped, None
                if final:
                    self._closed = True
                taken = self._retire_unused()
                if taken is not None:
                    claim = self._begin_claim()
            if dropped is not None:
                self._log(dropped)
            if taken is None:
                return None
            return _Unused(taken[0], taken[1], claim)
        except BaseException:
            if claim != 0:
                with self._lock:
                    self._in_flight -= 1
                    self._end_claim(claim)
            raise

    def _retire_unused(
            self) -> Optional[Tuple[List[Tuple[_Issued, int]], bool]]:
        """take_unused's work with _cond held: (returns, pair), or None."""
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
            self._retire_current()
            self._range = None
            self._prefetch_number = None
            if self._next <= r.high:
                returns.append((r, self._next - 1))  # low - 1: none used
        if not returns:
            return None
        return returns, pair and len(returns) == 2

    def end_return(self, unused: _Unused,
                   outcomes: Sequence[Union[_ReturnResult, HiloError]],
                   first: int = 0) -> None:
        """Ends the return take_unused began: counts and logs each outcome
        (outcomes[first + i] is that of unused.returns[i]; one missing
        counts as failed) and ends the claim, waking the callers waiting
        for it."""
        lines = []
        with self._lock:
            try:
                n = len(unused.returns)
                results = [outcomes[first + k] if first + k < len(outcomes)
                           else _NO_OUTCOME for k in range(n)]

                def back(k: int) -> bool:
                    o = results[k]
                    # A refusal with Max already at `last` is a retried
                    # copy of a return that applied (its reply was lost).
                    return isinstance(o, _ReturnResult) and (
                        o.applied or o.max == unused.returns[k][1])

                # A pair's tail comes back only after the range above it
                # did.
                tail_back = unused.pair and back(1)
                # Dropped (the return outlived its lease), a fetch may have
                # come since: the request after it reports its range, which
                # last_max must not fall below.
                mine = self._claim == unused.claim
                for k, (issued, last) in enumerate(unused.returns):
                    o = results[k]
                    refused = not (back(k) or (k == 0 and tail_back)
                                   or isinstance(o, HiloError))
                    # Whatever the answer, this range is never used again,
                    # so its numbers above `last` are no longer held (a
                    # return of unknown outcome may have applied, and then
                    # the node's next range rightly starts right after
                    # `last`). A range fetched while this return was in
                    # flight was checked against them, so has none of them.
                    self._held.remove(issued.node_tag, last + 1, issued.high)
                    if mine and k == 0 and not refused:
                        # The first return is of the range fetched last,
                        # the one the next request reports (CONTRACT.md
                        # R4): unless the node refused it, last_max becomes
                        # the highest number handed out of that node's
                        # ranges, at or below its Max for ever, so the node
                        # skips none of the numbers other clients handed
                        # back meanwhile. Refused, the range's high stays
                        # (at or below Max: nothing applied).
                        self._previous = self._previous._replace(
                            max=self._used.get(issued.node_tag, 0))
                    if back(k) or (k == 0 and tail_back):
                        self._applied += 1
                    elif isinstance(o, HiloError):
                        self._failed += 1
                        self._count_error(o)
                        lines.append(
                            f"hilo: returning numbers {last + 1}-"
                            f"{issued.high} of collection "
                            f"{self._collection!r} failed: {o}")
                    else:
                        self._refused += 1
                if mine:
                    self._error = None
            finally:
                # _end_claim, without the call: an exception at the start of
                # a call would skip it.
                self._in_flight -= 1
                if self._claim == unused.claim:
                    self._claim = 0
                    self._calls += 1
                    self._cond.notify_all()
        for line in lines:
            self._log(line)

    def add_stats_to(self, stats: Dict[str, object]) -> None:
        with self._lock:
            stats["calls_waited"] += self._waited
            stats["ranges_fetched"] += self._fetched
            stats["ranges_prefetched"] += self._prefetched
            stats["returns_applied"] += self._applied
            stats["returns_refused"] += self._refused
            stats["returns_failed"] += self._failed
            for code, n in self._errors.items():
                stats["errors"][code] = stats["errors"].get(code, 0) + n
            r = self._range
            if r is None:
                return
            taken = self._next - r.low
            held = r.high - self._next + 1
            if self._ahead is not None:
                held += self._ahead.high - self._ahead.low + 1
            handed_out = self._window_taken_before + taken
            window = self._clock() - self._window_start
            if handed_out > 0 and window > 0:
                stats["runway"][self._collection] = (
                    window * held / handed_out)
