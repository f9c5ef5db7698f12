"""Tests of hilo_client._range_cache (_RangeCache): one fetch at a time
per collection, prefetching the next range, the runway, and no range
after close."""

import os
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hilo_client import Client, HiloError, Id  # noqa: E402
from fixtures import (  # noqa: E402
    ManualPrefetcher, StubSpy, run_threads, ServerTestCase)
from hilo_client._range_cache import (  # noqa: E402
    _HOLDER_TURNS, _RangeCache, _let_holder_run)
from hilo_client._transport import _Issued, _ReturnResult  # noqa: E402


class RangeCacheWithoutServerTest(unittest.TestCase):

    def test_runway_is_the_numbers_held_at_the_recent_rate(self):
        class Consecutive:
            """Ranges of 32 from node A, one after the other, as a node
            hands them to its only client."""

            def __init__(self):
                self.high = 0

            def next(self, collection, previous, held):
                self.high += 32
                return _Issued(self.high - 31, self.high, "A", None, 0, 1)

        now = [100.0]
        prefetcher = ManualPrefetcher()
        cache = _RangeCache("o", Consecutive(), lambda line: None, 0.2,
                            prefetcher.schedule, clock=lambda: now[0])

        def runway():
            stats = {"calls_waited": 0, "ranges_fetched": 0,
                     "ranges_prefetched": 0, "returns_applied": 0,
                     "returns_refused": 0, "returns_failed": 0,
                     "errors": {}, "runway": {}}
            cache.add_stats_to(stats)
            return stats["runway"].get("o")

        self.assertIsNone(runway())  # nothing held
        self.assertEqual(cache.next().number, 1)
        self.assertIsNone(runway())  # no time passed
        now[0] += 1
        self.assertAlmostEqual(runway(), 31.0)  # 31 held at 1 a second
        for n in range(2, 11):
            self.assertEqual(cache.next().number, n)
        self.assertAlmostEqual(runway(), 2.2)  # 22 at 10 a second
        self.assertEqual(len(prefetcher.tasks), 1)  # the 7th asked for 33-64
        prefetcher.tasks[0]()
        self.assertAlmostEqual(runway(), 5.4)  # 22 + 32 at 10 a second
        now[0] += 1
        for n in range(11, 34):
            self.assertEqual(cache.next().number, n)
        # 33-64 took over; the window began with 1-32: 33 numbers in 2 s.
        self.assertAlmostEqual(runway(), 31 * 2 / 33)
        now[0] += 2
        # No number for 2 s: the rate falls to 33 in 4 s.
        self.assertAlmostEqual(runway(), 31 * 4 / 33)
        self.assertIsNotNone(cache.take_unused(final=True))
        self.assertIsNone(runway())  # nothing held

    def test_a_lock_held_long_is_waited_for_a_bounded_number_of_turns(self):
        class HeldLock:
            """A lock another thread holds until `locked()` has been asked
            `held_for` times."""

            def __init__(self, held_for):
                self.held_for = held_for
                self.asked = 0

            def locked(self):
                self.asked += 1
                return self.asked <= self.held_for

        soon = HeldLock(held_for=3)
        _let_holder_run(soon)
        self.assertEqual(soon.asked, 4)  # free at the 4th turn
        # Held past every turn: it gives up, and the caller's `with` then
        # sleeps on the lock like any other.
        long = HeldLock(held_for=10 * _HOLDER_TURNS)
        _let_holder_run(long)
        self.assertEqual(long.asked, _HOLDER_TURNS)


    # Every point after a collection is claimed (a fetch or a return
    # begins) at which CPython may run a signal handler (the start of a
    # Python function, the return of a C one) gets an exception, as Ctrl-C
    # would raise there, one point per round, until a round passes every
    # point without one. after(point, left) runs after each round; `left`
    # says whether the round left a claim behind. The number of points.
    def _interrupt_at_each_point_after_a_claim(self, cache, call, after):
        points = 0
        while True:
            seen = [0]

            def interrupt(frame, event, arg):
                if event in ("call", "c_return") and cache._claim != 0:
                    seen[0] += 1
                    if seen[0] == points + 1:
                        raise KeyboardInterrupt("injected")

            sys.setprofile(interrupt)
            try:
                call()
                interrupted = False
            except KeyboardInterrupt:
                interrupted = True
            finally:
                sys.setprofile(None)
            after(points + 1, cache._claim != 0)
            if not interrupted:
                return points
            points += 1

    def _next_within(self, draw, what):
        """draw() on a thread of its own (one waiting for a claim left
        behind would not return): its result, or fails the test."""
        got = []
        t = threading.Thread(target=lambda: got.append(draw()))
        t.start()
        t.join(10)
        self.assertEqual(len(got), 1, f"{what}: no answer within 10 s")
        return got[0]

    def test_an_interrupted_fetch_leaves_no_claim_behind(self):
        class OneByOne:
            """Ranges of one number from node A, one after the other: each
            next() fetches."""

            def __init__(self):
                self.high = 0

            def next(self, collection, previous, held):
                self.high += 1
                return _Issued(self.high, self.high, "A", None, 0, 1)

        source = OneByOne()
        cache = _RangeCache("o", source, lambda line: None, 0, None)
        numbers = []

        def draws_on(point, left):
            self.assertFalse(left, f"a claim left at point {point}")
            numbers.append(self._next_within(
                lambda: cache.next().number, f"after point {point}"))

        points = self._interrupt_at_each_point_after_a_claim(
            cache, lambda: numbers.append(cache.next().number), draws_on)
        self.assertGreater(points, 3)
        self.assertEqual(len(numbers), len(set(numbers)))
        # An interrupted fetch may cost its range, never more.
        self.assertLessEqual(max(numbers), source.high)

    def test_a_return_interrupted_anywhere_holds_no_caller_past_its_lease(
            self):
        class Node:
            """One node's ranges of 32, one after the other; a return
            applies if its range is the last one issued (the node's Max
            goes back to `last`), else it is refused."""

            failovers = 0

            def __init__(self):
                self.max = 0

            def next(self, collection, previous, held):
                self.max += 32
                return _Issued(self.max - 31, self.max, "A", None, 0, 1)

            def return_many(self, items):
                outcomes = []
                for item in items:
                    if item.issued.high == self.max:
                        self.max = item.last
                        outcomes.append(_ReturnResult(True, self.max))
                    else:
                        outcomes.append(_ReturnResult(False, self.max))
                return outcomes

            def close(self):
                pass

        lines = []
        c = Client(["unused:1"], prefetch_at=0, rpc_deadline=2,
                   log=lines.append)
        c._source = Node()
        c.next_id("o")
        cache = c._caches["o"]
        now = [0.0]
        cache._clock = lambda: now[0]
        # Twice 2 s for its one target (a second ask without the echo), + 1.
        self.assertEqual(cache._lease, 5)
        numbers = []
        left_behind = []

        def draw_and_return():
            numbers.append(c.next_id("o").number)
            c.return_unused_ranges()

        def draws_on(point, left):
            if left:
                # Only a call into end_return itself, before its `with`,
                # can leave the claim: the lease ends it.
                left_behind.append(point)
                now[0] += 100  # past any lease
            numbers.append(self._next_within(
                lambda: c.next_id("o").number, f"after point {point}"))
            self.assertEqual(cache._claim, 0)

        self.assertGreater(self._interrupt_at_each_point_after_a_claim(
            cache, draw_and_return, draws_on), 3)
        self.assertEqual(len(numbers), len(set(numbers)))
        self.assertEqual(
            len([line for line in lines if "going on without it" in line]),
            len(left_behind))
        c.close()
        self.assertEqual(cache._claim, 0)

    def test_a_claim_past_its_lease_is_dropped_and_the_caller_goes_on(self):
        class FirstHeld:
            """Ranges of 32; the first fetch ends when the test says so."""

            def __init__(self):
                self.release = threading.Event()
                self.started = threading.Event()
                self.high = 0

            def next(self, collection, previous, held):
                self.high += 32
                high = self.high
                if high == 32:
                    self.started.set()
                    self.release.wait(30)
                return _Issued(high - 31, high, "A", None, 0, 1)

        source = FirstHeld()
        lines = []
        now = [0.0]
        cache = _RangeCache("o", source, lines.append, 0, None,
                            clock=lambda: now[0], lease=5)
        first = []
        fetcher = threading.Thread(target=lambda: first.append(cache.next()))
        fetcher.start()
        self.assertTrue(source.started.wait(10))
        now[0] += 5
        # The first fetch is still in flight, but its lease is over.
        self.assertEqual(self._next_within(cache.next, "next()"),
                         Id(33, "A"))
        self.assertEqual(lines, [
            "hilo: collection 'o': a fetch or return began 5 s ago and has "
            "not ended (its caller was interrupted, or the call outlived its "
            "deadlines); going on without it"])
        source.release.set()
        fetcher.join(10)
        # The late range 1-32 is not used: the range taken since was not
        # checked against it. Its caller takes the next number of 33-64.
        self.assertEqual(first, [Id(34, "A")])
        self.assertEqual(cache.next(), Id(35, "A"))

    def test_a_late_range_cannot_repeat_numbers_of_a_node_that_went_back(
            self):
        class WentBack:
            """Node A, whose history goes back (a restore) while the
            client's second fetch is slow: it issues 2-33 to that fetch and
            again to the next one. The held numbers each fetch is given
            refuse a range they overlap, as _GrpcRangeSource does."""

            def __init__(self):
                self.calls = 0
                self.slow_started = threading.Event()
                self.release_slow = threading.Event()

            def next(self, collection, previous, held):
                self.calls += 1
                if self.calls == 1:
                    return _Issued(1, 1, "A", None, 0, 1)
                if self.calls == 2:
                    self.slow_started.set()
                    self.release_slow.wait(30)
                refusal = held.refusal("A", 2, 33)
                if refusal is not None:
                    raise HiloError(grpc.StatusCode.INTERNAL, refusal)
                return _Issued(2, 33, "A", None, 0, 1)

        source = WentBack()
        now = [0.0]
        cache = _RangeCache("o", source, lambda line: None, 0, None,
                            clock=lambda: now[0], lease=5)
        ids = [cache.next()]
        late = []
        slow = threading.Thread(target=lambda: late.append(cache.next()))
        slow.start()
        self.assertTrue(source.slow_started.wait(10))
        now[0] += 5  # the slow fetch's lease is over
        ids += [cache.next(), cache.next()]  # the third fetch: 2-33
        source.release_slow.set()  # the slow one: 2-33 as well
        slow.join(10)
        ids += late + [cache.next() for _ in range(29)]
        self.assertEqual(ids, [Id(n, "A") for n in range(1, 34)])
        # The node offers 2-33 again: refused, never a number twice.
        with self.assertRaises(HiloError) as cm:
            cache.next()
        self.assertEqual(cm.exception.code, grpc.StatusCode.INTERNAL)

    def test_close_goes_on_without_a_fetch_past_its_lease(self):
        class Held:
            """A fetch that ends when the test says so."""

            def __init__(self):
                self.release = threading.Event()
                self.started = threading.Event()

            def next(self, collection, previous, held):
                self.started.set()
                self.release.wait(30)
                return _Issued(1, 32, "A", None, 0, 1)

        source = Held()
        lines = []
        now = [0.0]
        cache = _RangeCache("o", source, lines.append, 0, None,
                            clock=lambda: now[0], lease=5)
        outcomes = []

        def draw():
            try:
                outcomes.append(cache.next())
            except HiloError as e:
                outcomes.append(e.code)

        fetcher = threading.Thread(target=draw)
        fetcher.start()
        self.assertTrue(source.started.wait(10))
        now[0] += 5
        self.assertIsNone(self._next_within(
            lambda: cache.take_unused(final=True), "take_unused"))
        self.assertEqual(len(lines), 1)
        # The fetch ends after the close: its range is not handed out.
        source.release.set()
        fetcher.join(10)
        self.assertEqual(outcomes, [grpc.StatusCode.FAILED_PRECONDITION])
        self.assertEqual(cache._claim, 0)


class RangeCacheTest(ServerTestCase):

    def test_a_call_that_races_close_is_refused_not_given_a_new_range(self):
        # A caller past next_id's own closed check when close() begins
        # reaches the cache after close() retired it: it must neither fetch
        # a range that is never handed back nor call a closed channel.
        c = Client([self.server.target], prefetch_at=0)
        c.next_id("race")
        cache = c._caches["race"]
        c.close()
        with self.assertRaises(HiloError) as cm:
            cache.next()
        self.assertEqual(cm.exception.code,
                         grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("the hilo client is closed; no more IDs of collection "
                      "'race'", cm.exception.message)
        self.assertEqual(c.stats().ranges_fetched, 1)
        self.assertEqual(c.stats().returns_applied, 1)

    def test_threads_share_ranges_and_one_fetches_at_a_time(self):
        # Without prefetching, and with the real prefetch thread, which
        # shares the one fetch in flight with the callers that run dry.
        for prefetch_at in (0, 0.2):
            with self.subTest(prefetch_at=prefetch_at):
                self._threads_share_ranges(prefetch_at)

    def _threads_share_ranges(self, prefetch_at):
        c = self.client(prefetch_at=prefetch_at, manual_prefetch=False)
        source = c._source
        real_next = source.next
        lock = threading.Lock()
        in_flight = {}
        most = {}
        fetches = {}

        def counting_next(collection, previous, held=None):
            with lock:
                in_flight[collection] = in_flight.get(collection, 0) + 1
                most[collection] = max(most.get(collection, 0),
                                       in_flight[collection])
                fetches[collection] = fetches.get(collection, 0) + 1
            try:
                time.sleep(0.02)  # widen the window for a second fetcher
                return real_next(collection, previous, held)
            finally:
                with lock:
                    in_flight[collection] -= 1

        source.next = counting_next
        per_thread = 500
        names = (f"even-{prefetch_at}", f"odd-{prefetch_at}")
        results = run_threads(
            16, lambda i: [c.next_id(names[i % 2]) for _ in range(per_thread)])
        for parity, name in enumerate(names):
            got = [id_ for i, ids in enumerate(results) if i % 2 == parity
                   for id_ in ids]
            # Every number once, none skipped: one client's ranges follow
            # each other and each is used up before the next is taken.
            self.assertEqual(sorted(got),
                             [Id(n, "A") for n in range(1, 8 * per_thread + 1)])
            self.assertEqual(most[name], 1)
            # 4000 numbers: 32+64+...+2048 = 4064, so exactly 7 ranges
            # used; with prefetching, an 8th may have been fetched ahead.
            if prefetch_at == 0:
                self.assertEqual(fetches[name], 7)
            else:
                self.assertIn(fetches[name], (7, 8))
        c.close()  # waits for a prefetch still in flight
        stats = c.stats()
        self.assertEqual(stats.ranges_fetched,
                         fetches[names[0]] + fetches[names[1]])
        if prefetch_at == 0:
            self.assertEqual(stats.ranges_prefetched, 0)
        else:
            self.assertGreater(stats.ranges_prefetched, 0)

    def test_prefetch_fetches_the_next_range_ahead_so_callers_do_not_wait(self):
        c = self.client()  # prefetch_at 0.2 by default
        spy = StubSpy(c)
        self.assertEqual([c.next_id("o") for _ in range(6)],
                         [Id(n, "A") for n in range(1, 7)])
        self.assertEqual(c._prefetcher.tasks, [])
        # The 7th number ends the first fifth of 1-32 (6.4, rounded up).
        self.assertEqual(c.next_id("o"), Id(7, "A"))
        self.assertEqual(c._prefetcher.run_all(), 1)
        # It reported the range in use (so the size doubled) and asked for
        # the range after it.
        self.assertEqual([(r.low, r.high) for r in spy.next_replies],
                         [(1, 32), (33, 96)])
        self.assertEqual([c.next_id("o") for _ in range(8, 45)],
                         [Id(n, "A") for n in range(8, 45)])
        self.assertEqual(len(spy.next_replies), 2)  # 33 came from memory
        self.assertEqual(c._prefetcher.tasks, [])
        # A fifth of 33-96 is 12.8 numbers: the 13th, 45, asks again.
        self.assertEqual(c.next_id("o"), Id(45, "A"))
        self.assertEqual(c._prefetcher.run_all(), 1)
        self.assertEqual((spy.next_replies[2].low, spy.next_replies[2].high),
                         (97, 224))
        stats = c.stats()
        self.assertEqual(
            (stats.calls_waited, stats.ranges_fetched,
             stats.ranges_prefetched, stats.failovers, stats.errors),
            (1, 3, 2, 0, {}))

    def test_prefetch_and_refill_share_one_fetch(self):
        c = self.client()
        source = c._source
        real_next = source.next
        gate = threading.Event()
        calls = []

        def gated_next(collection, previous, held=None):
            calls.append(previous.max)
            if len(calls) == 2:  # the prefetch: held until the test says
                self.assertTrue(gate.wait(10))
            return real_next(collection, previous, held)

        source.next = gated_next
        self.assertEqual([c.next_id("o") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        prefetch = threading.Thread(target=c._prefetcher.run_all)
        prefetch.start()
        try:
            # The rest of 1-32 comes from memory while the prefetch waits.
            self.assertEqual([c.next_id("o") for _ in range(8, 33)],
                             [Id(n, "A") for n in range(8, 33)])
            # Callers that run dry now wait for the fetch in flight.
            drawn = []
            drawers = [threading.Thread(
                target=lambda: drawn.append(c.next_id("o")))
                for _ in range(4)]
            for t in drawers:
                t.start()
            cache = c._caches["o"]
            deadline = time.monotonic() + 10
            while (len(cache._cond._waiters) < 4
                   and time.monotonic() < deadline):
                time.sleep(0.005)
            self.assertEqual(len(cache._cond._waiters), 4)
        finally:
            gate.set()
            prefetch.join(10)
        for t in drawers:
            t.join(10)
        self.assertEqual(sorted(drawn), [Id(n, "A") for n in range(33, 37)])
        self.assertEqual(calls, [0, 32])  # one fetch, one prefetch
        stats = c.stats()
        self.assertEqual((stats.calls_waited, stats.ranges_fetched,
                          stats.ranges_prefetched), (5, 2, 1))

    def test_failed_prefetch_is_fetched_by_the_caller_that_runs_dry(self):
        c = self.client()
        source = c._source
        real_next = source.next
        calls = []

        def failing_prefetch(collection, previous, held=None):
            calls.append(previous.max)
            if len(calls) == 2:
                raise HiloError(grpc.StatusCode.UNAVAILABLE, "blip")
            return real_next(collection, previous, held)

        source.next = failing_prefetch
        self.assertEqual([c.next_id("o") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        self.assertEqual(c._prefetcher.run_all(), 1)  # fails, quietly
        self.assertEqual([c.next_id("o") for _ in range(8, 34)],
                         [Id(n, "A") for n in range(8, 34)])
        self.assertEqual(calls, [0, 32, 32])
        stats = c.stats()
        self.assertEqual(
            (stats.calls_waited, stats.ranges_fetched,
             stats.ranges_prefetched, stats.errors),
            (2, 2, 0, {grpc.StatusCode.UNAVAILABLE: 1}))


if __name__ == "__main__":
    unittest.main()
