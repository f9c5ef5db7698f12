"""Tests of hilo_client.Client against a real hilo_server.

    HILO_SERVER_BIN=.../hilo_server HILO_CPP_ID_DUMP=.../cpp_id_dump \
    PYTHONPATH=build/gen/python:clients/python \
    /usr/bin/python3 -m unittest discover -s clients/python/tests -v
"""

import os
import re
import subprocess
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hilo.v1 import hilo_pb2, hilo_pb2_grpc  # noqa: E402
from hilo_client import Client, ClientStats, HiloError, Id  # noqa: E402
from server import HiloServer, unused_target  # noqa: E402
from hilo_client._range_cache import _RangeCache  # noqa: E402
from hilo_client._transport import _Issued  # noqa: E402


def raw_next_range(target, collection):
    """NextRange as a new client (no last_*): (low, high, node_tag)."""
    with grpc.insecure_channel(target) as channel:
        r = hilo_pb2_grpc.HiLoStub(channel).NextRange(
            hilo_pb2.NextRangeRequest(collection=collection), timeout=10)
    return r.low, r.high, r.node_tag


def raw_stub(target):
    """A channel and a HiLoStub for calls the client would not make."""
    channel = grpc.insecure_channel(target)
    return channel, hilo_pb2_grpc.HiLoStub(channel)


def raw_return(target, **fields):
    """ReturnRange with exactly `fields`: (applied, max)."""
    with grpc.insecure_channel(target) as channel:
        r = hilo_pb2_grpc.HiLoStub(channel).ReturnRange(
            hilo_pb2.ReturnRangeRequest(**fields), timeout=10)
    return r.applied, r.max


def stored(target, collection):
    """(max, return_floor, updated_at in µs) of `collection` on the node,
    from HiLoAdmin.GetCollection."""
    with grpc.insecure_channel(target) as channel:
        r = hilo_pb2_grpc.HiLoAdminStub(channel).GetCollection(
            hilo_pb2.GetCollectionRequest(collection=collection), timeout=10)
    c = r.collection
    return c.max, c.return_floor, c.updated_at.ToMicroseconds()


class FakeRpcError(grpc.RpcError):
    """What a failed call raises, for a connection lost on purpose."""

    def __init__(self, code, details):
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self):
        return self._code

    def details(self):
        return self._details


class ManualPrefetcher:
    """Stands in for the client's prefetch thread: holds the prefetch tasks
    until the test runs them."""

    def __init__(self):
        self.tasks = []

    def schedule(self, task):
        self.tasks.append(task)

    def run_all(self):
        """Runs the queued tasks on this thread; returns how many ran."""
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task()
        return len(tasks)

    def stop(self, timeout):
        self.tasks.clear()


class StubSpy:
    """Sits between a client and the real stub of one of its targets.

    Keeps every NextRange reply (next_replies, as the client got them),
    every ReturnRange attempt
    (returns: [request, reply or None]) and every ReturnRanges attempt
    (batch_calls: [request, reply or None]). Optionally rewrites replies
    (node_tag, range_token, or rewrite(reply) for anything else) and makes
    ReturnRange attempts fail with
    UNAVAILABLE as a lost connection would: fail_returns[i] is None (pass),
    "before" (the request never reaches the server) or "after" (the server
    serves it, the reply is lost); fail_batches does the same to ReturnRanges
    attempts.

    Unless batches is True, ReturnRanges answers UNIMPLEMENTED without
    reaching the server, as a server older than it would (nothing applied),
    so the client's returns go one by one through ReturnRange.

    after_return, if set, runs after each ReturnRange or ReturnRanges call
    the server served: another client's request arriving right then."""

    def __init__(self, client, index=0, batches=False):
        self._stub = client._source._targets[index].stub
        self._next_range = self._stub.NextRange
        self._return_range = self._stub.ReturnRange
        self._return_ranges = self._stub.ReturnRanges
        self.next_replies = []
        self.returns = []
        self.fail_returns = []
        self.batch_calls = []
        self.fail_batches = []
        self.batches = batches
        self.node_tag = None
        self.range_token = None
        self.rewrite = None
        self.after_return = None
        self._stub.NextRange = self._next
        self._stub.ReturnRange = self._return
        self._stub.ReturnRanges = self._return_many

    def _next(self, request, timeout=None):
        reply = self._next_range(request, timeout=timeout)
        if self.node_tag is not None:
            reply.node_tag = self.node_tag
        if self.range_token is not None:
            reply.range_token = self.range_token
        if self.rewrite is not None:
            self.rewrite(reply)
        self.next_replies.append(reply)
        return reply

    def _return(self, request, timeout=None):
        reply = self._record(request, timeout, self.returns,
                             self.fail_returns, self._return_range)
        if self.after_return is not None:
            self.after_return()
        return reply

    def _return_many(self, request, timeout=None):
        reply = self._record(request, timeout, self.batch_calls,
                             self.fail_batches,
                             self._return_ranges if self.batches else None)
        if self.after_return is not None:
            self.after_return()
        return reply

    @staticmethod
    def _record(request, timeout, calls, fails, send):
        """Appends [request, reply or None] to calls, failing as
        fails[len(calls)] says; send None means UNIMPLEMENTED."""
        fail = fails[len(calls)] if len(calls) < len(fails) else None
        copy = type(request)()
        copy.CopyFrom(request)
        call = [copy, None]
        calls.append(call)
        if send is None:
            raise FakeRpcError(grpc.StatusCode.UNIMPLEMENTED,
                               "Method not found: hilo.v1.HiLo/ReturnRanges")
        if fail == "before":
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "dropped before")
        reply = send(request, timeout=timeout)
        if fail == "after":
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "reply lost")
        call[1] = reply
        return reply


def run_threads(n, fn):
    """Runs fn(i) on n threads at once; returns their results in order and
    re-raises the first exception."""
    results = [None] * n
    errors = []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait()
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


class ClientWithoutServerTest(unittest.TestCase):
    """What needs no server: options refused at construction, names, and
    how returns are cut into calls."""

    def test_channels_cap_the_reconnect_backoff_at_one_second(self):
        # CONTRACT.md R18: gRPC's default back-off grows to 2 minutes, so a
        # client could wait that long after a server's return. Asserted on
        # what the channels are made with (the conformance scenario
        # reconnects_soon_after_long_outage measures the recovery), and
        # again for the channels a forked child makes.
        from unittest import mock

        made = []
        real = grpc.insecure_channel

        def spy(target, options=None, *args, **kwargs):
            made.append(dict(options or ()))
            return real(target, options, *args, **kwargs)

        with mock.patch.object(grpc, "insecure_channel", spy):
            client = Client(["127.0.0.1:1", "127.0.0.1:2"])
            client._after_fork_in_child()
            client.close()
        self.assertEqual(len(made), 4)
        for options in made:
            self.assertEqual(options.get("grpc.max_reconnect_backoff_ms"), 1000)
            self.assertEqual(
                options.get("grpc.initial_reconnect_backoff_ms"), 100)

    def test_return_retries_run_on_the_monotonic_clock_alone(self):
        # The wall clock steps back by an hour before each attempt and
        # forward by two after it; the monotonic clock moves by what each
        # attempt waited (its whole timeout: no answer). The attempts still
        # share one rpc_deadline, neither stretched nor cut.
        from unittest import mock

        from hilo_client import _transport as impl

        class Clocks:
            def __init__(self):
                self.mono = 1000.0
                self.wall = 1.8e9

            def monotonic(self):
                return self.mono

            def time(self):
                return self.wall

            def sleep(self, seconds):
                self.mono += seconds
                self.wall += seconds

        clocks = Clocks()
        timeouts = []

        class SilentStub:
            def ReturnRange(self, request, timeout=None):
                clocks.wall -= 3600
                timeouts.append(timeout)
                clocks.mono += timeout
                clocks.wall += 7200 + timeout
                raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "slow")

        source = impl._GrpcRangeSource(
            [impl._Target("node-a:1", None, SilentStub())], 3.0)
        issued = impl._Issued(1, 32, "A", None, 0, 77)
        with mock.patch.object(impl, "time", clocks):
            with self.assertRaises(HiloError) as cm:
                source.return_("o", issued, 4)
        self.assertEqual(cm.exception.code,
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        # 3 s for three attempts: a third, then half of the rest less the
        # backoff, then what is left.
        self.assertEqual(len(timeouts), 3)
        self.assertAlmostEqual(timeouts[0], 1.0)
        self.assertAlmostEqual(sum(timeouts) + 0.05 + 0.1, 3.0)
        self.assertAlmostEqual(clocks.mono - 1000.0, 3.0)

    def test_a_pair_is_never_split_across_two_calls(self):
        from hilo_client import _transport as impl

        class RecordingStub:
            def __init__(self):
                self.calls = []

            def ReturnRanges(self, request, timeout=None):
                self.calls.append([(r.collection, r.end, r.last)
                                   for r in request.returns])
                return hilo_pb2.ReturnRangesResponse(results=[
                    hilo_pb2.ReturnRangeResult(applied=True, max=r.last)
                    for r in request.returns])

        # Before the pair: enough items to fill a call to its item limit,
        # or (with 256-byte names) to its byte limit, give or take one.
        for singles, name_bytes in ([(n, 8) for n in range(997, 1002)]
                                    + [(n, 256) for n in range(205, 230)]):
            with self.subTest(singles=singles, name_bytes=name_bytes):
                stub = RecordingStub()
                source = impl._GrpcRangeSource(
                    [impl._Target("node-a:1", None, stub)], 5.0)
                ranges = [impl._Issued(1, 32, "A", None, 0, 1 + i)
                          for i in range(singles)]
                items = [impl._ReturnItem(f"c{i}".ljust(name_bytes, "x"),
                                          r, 4)
                         for i, r in enumerate(ranges)]
                pair = "pair".ljust(name_bytes, "y")
                items.append(impl._ReturnItem(
                    pair, impl._Issued(33, 64, "A", None, 0, 9001), 32,
                    True))
                items.append(impl._ReturnItem(
                    pair, impl._Issued(1, 32, "A", None, 0, 9002), 4))
                results = source.return_many(items)
                self.assertEqual(
                    [(r.applied, r.max) for r in results],
                    [(True, 4)] * singles + [(True, 32), (True, 4)])
                holding = [call for call in stub.calls
                           if any(c == pair for c, _, _ in call)]
                self.assertEqual(len(holding), 1)
                at = [c for c, _, _ in holding[0]].index(pair)
                self.assertEqual(holding[0][at:at + 2],
                                 [(pair, 64, 32), (pair, 32, 4)])
                for call in stub.calls:
                    self.assertLessEqual(len(call), 1000)

    def test_separators_that_can_be_part_of_the_number_are_refused(self):
        # The number of an ID is the digits between the last separator and
        # the last '-'. A digit as separator makes two IDs equal (with '1',
        # collection 'a' number 113 and collection 'a1' number 13 are both
        # 'a1113-A'); '-' leaves nothing between the two.
        for sep in "0123456789":
            with self.subTest(sep=sep):
                with self.assertRaises(HiloError) as cm:
                    Client(["x:1"], separator=sep)
                self.assertEqual(cm.exception.code,
                                 grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(f"separator '{sep}' is a digit",
                              cm.exception.message)
                self.assertIn("two IDs could be equal", cm.exception.message)
        with self.assertRaises(HiloError) as cm:
            Client(["x:1"], separator="-")
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("last '-'", cm.exception.message)
        for sep in "/:._aZ \u0663":  # U+0663 is a digit, but not one we print
            Client(["x:1"], separator=sep).close()

    def test_prefetch_options_are_checked(self):
        for bad in (-0.1, 1, 1.5, float("nan"), "0.2", None, True):
            with self.subTest(prefetch_at=bad):
                with self.assertRaises(ValueError):
                    Client(["x:1"], prefetch_at=bad)
        off = Client(["x:1"], prefetch_at=0)
        self.assertIsNone(off._prefetcher)
        off.close()

    def test_stats_are_named_as_the_cpp_client_stats(self):
        self.assertEqual(
            [f for f in ClientStats.__dataclass_fields__],
            ["calls_waited", "ranges_fetched", "ranges_prefetched",
             "failovers", "returns_applied", "returns_refused",
             "returns_failed", "errors", "runway"])

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


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.server = HiloServer("A")
        self.addCleanup(self.server.cleanup)
        self.logs = []

    def test_a_call_that_races_close_gets_runtime_error_not_a_new_range(self):
        # A caller past next_id's own closed check when close() begins
        # reaches the cache after close() retired it: it must neither fetch
        # a range that is never handed back nor call a closed channel.
        c = Client([self.server.target], prefetch_at=0)
        c.next_id("race")
        cache = c._caches["race"]
        c.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            cache.next()
        self.assertEqual(c.stats().ranges_fetched, 1)
        self.assertEqual(c.stats().returns_applied, 1)

    def test_second_close_waits_for_the_first(self):
        c = Client([self.server.target], prefetch_at=0)
        c.next_id("twice")
        gate = threading.Event()
        real = c._source.return_many

        def slow(items):
            gate.wait(10)
            return real(items)

        c._source.return_many = slow
        first = threading.Thread(target=c.close)
        first.start()
        while not c._closed:
            time.sleep(0.001)
        second_done = threading.Event()
        second = threading.Thread(target=lambda: (c.close(),
                                                  second_done.set()))
        second.start()
        self.assertFalse(second_done.wait(0.2))  # the first still returns
        gate.set()
        first.join(10)
        second.join(10)
        self.assertTrue(second_done.is_set())
        self.assertEqual(c.stats().returns_applied, 1)

    def test_a_dropped_client_stops_its_prefetch_thread(self):
        import gc

        c = Client([self.server.target], prefetch_at=0.2)
        for _ in range(10):  # past a fifth of 32: a prefetch starts
            c.next_id("dropped")
        thread = c._prefetcher._thread
        self.assertIsNotNone(thread)
        del c
        gc.collect()
        thread.join(10)
        self.assertFalse(thread.is_alive())

    def client(self, targets=None, manual_prefetch=True, **kw):
        """A client of `targets` (this test's server by default). Unless
        manual_prefetch is False, its prefetch tasks wait in
        c._prefetcher (a ManualPrefetcher) until the test runs them."""
        c = Client(targets or [self.server.target], log=self.logs.append, **kw)
        if manual_prefetch and c._prefetcher is not None:
            c._prefetcher = ManualPrefetcher()
        self.addCleanup(c.close)
        return c

    def test_options_are_checked(self):
        for bad in ([], [""], ["ok", ""]):
            with self.assertRaises(ValueError):
                Client(bad)
        for sep in ("|", "", "ab"):
            with self.assertRaises(ValueError):
                Client(["x:1"], separator=sep)
        for deadline in (0, -1):
            with self.assertRaises(ValueError):
                Client(["x:1"], rpc_deadline=deadline)
        # Connecting is lazy: no server is needed to create a client.
        Client(unused_target()).close()

    def test_ids_of_neighbouring_collections_stay_apart_and_read_back(self):
        for sep in "/:x.":
            with self.subTest(sep=sep):
                c = self.client(separator=sep)
                seen = set()
                for collection in ("a" + sep, "a"):
                    for _ in range(40):
                        doc = c.next_document_id(collection)
                        self.assertNotIn(doc, seen)
                        seen.add(doc)
                        m = re.fullmatch(r"(.*)(\D)(\d+)-([A-Z0-9]{1,4})",
                                         doc, re.S)
                        self.assertIsNotNone(m, doc)
                        self.assertEqual(m.group(1), collection)
                        self.assertEqual(m.group(2), sep)
                        self.assertEqual(m.group(4), "A")

    def test_numbers_come_in_order_from_growing_ranges(self):
        c = self.client()
        ids = [c.next_id("orders") for _ in range(32 + 64 + 1)]
        self.assertEqual(ids, [Id(n, "A") for n in range(1, 98)])
        # Ranges 1-32, 33-96, 97-224: each request reported the previous
        # range (size, range_at, high), so the size doubled each time.
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (225, 256, "A"))

    def test_document_ids(self):
        c = self.client()
        self.assertEqual(c.next_document_id("orders"), "orders/1-A")
        self.assertEqual(c.next_document_id("orders"), "orders/2-A")
        self.assertEqual(c.next_document_id("users"), "users/1-A")
        self.assertEqual(c.next_document_id("café"), "café/1-A")
        colon = self.client(separator=":")
        self.assertEqual(colon.next_document_id("users"), "users:33-A")

    def test_bad_collection_names_are_invalid_argument(self):
        c = self.client()
        for bad in ["", "bad\x01name", "bad\nname", "x\x7f", "x" * 257,
                    "lone\ud800surrogate"]:
            with self.subTest(bad=bad):
                with self.assertRaises(HiloError) as cm:
                    c.next_id(bad)
                self.assertEqual(cm.exception.code,
                                 grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            c.next_id(b"orders")
        # 256 bytes is still fine, and the client stays usable.
        self.assertEqual(c.next_id("y" * 256), Id(1, "A"))
        self.assertEqual(c.next_id("orders"), Id(1, "A"))

    def test_close_returns_the_unused_tail(self):
        first = self.client()
        self.assertEqual(first.next_document_id("orders"), "orders/1-A")
        first.close()
        with self.assertRaises(RuntimeError):
            first.next_id("orders")
        second = self.client()
        self.assertEqual(second.next_document_id("orders"), "orders/2-A")
        self.assertEqual(self.logs, [])

    def test_next_client_gets_2_to_33_after_one_number_and_close(self):
        first = self.client()
        self.assertEqual(first.next_id("orders"), Id(1, "A"))
        first.close()
        second = self.client()
        spy = StubSpy(second)
        self.assertEqual([second.next_id("orders") for _ in range(32)],
                         [Id(n, "A") for n in range(2, 34)])
        self.assertEqual(
            [(r.low, r.high, r.node_tag) for r in spy.next_replies],
            [(2, 33, "A")])
        self.assertEqual(self.logs, [])

    def test_return_carries_the_range_token_and_is_applied(self):
        c = self.client()
        spy = StubSpy(c)
        self.assertEqual([c.next_id("orders") for _ in range(2)],
                         [Id(1, "A"), Id(2, "A")])
        c.close()
        self.assertEqual(len(spy.next_replies), 1)
        token = spy.next_replies[0].range_token
        self.assertNotEqual(token, 0)
        self.assertEqual(len(spy.returns), 1)
        request, reply = spy.returns[0]
        self.assertEqual(
            (request.collection, request.end, request.last, request.node_tag,
             request.range_token),
            ("orders", 32, 2, "A", token))
        self.assertEqual((reply.applied, reply.max), (True, 2))
        self.assertEqual(stored(self.server.target, "orders")[:2], (2, 2))
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (3, 34, "A"))
        self.assertEqual(self.logs, [])

    def test_same_return_sent_twice_applies_once(self):
        c = self.client()
        spy = StubSpy(c)
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        c.close()
        request, reply = spy.returns[0]
        self.assertEqual((reply.applied, reply.max), (True, 1))
        before = stored(self.server.target, "orders")
        self.assertEqual(before[:2], (1, 1))
        # The very same request again: the token was retired by the first.
        again = {f.name: v for f, v in request.ListFields()}
        self.assertEqual(raw_return(self.server.target, **again), (False, 1))
        self.assertEqual(stored(self.server.target, "orders"), before)
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (2, 33, "A"))

    def test_return_with_a_wrong_token_is_refused(self):
        channel, stub = raw_stub(self.server.target)
        self.addCleanup(channel.close)
        issued = stub.NextRange(
            hilo_pb2.NextRangeRequest(collection="orders"), timeout=10)
        self.assertEqual((issued.low, issued.high), (1, 32))
        token = issued.range_token
        self.assertNotEqual(token, 0)
        before = stored(self.server.target, "orders")
        self.assertEqual(before[:2], (32, 0))
        for guess in (token ^ 1, (token + 1) % 2**64, token ^ (1 << 63),
                      0x5EED5EED5EED5EED, 2**64 - 1):
            with self.subTest(guess=guess):
                self.assertEqual(
                    raw_return(self.server.target, collection="orders",
                               end=32, last=1, node_tag="A",
                               range_token=guess),
                    (False, 32))
                self.assertEqual(stored(self.server.target, "orders"),
                                 before)
        # The wrong tokens did not retire the right one.
        self.assertEqual(
            raw_return(self.server.target, collection="orders", end=32,
                       last=1, node_tag="A", range_token=token),
            (True, 1))
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (2, 33, "A"))

    def test_return_without_a_token_is_failed_precondition(self):
        channel, stub = raw_stub(self.server.target)
        self.addCleanup(channel.close)
        issued = stub.NextRange(
            hilo_pb2.NextRangeRequest(collection="orders"), timeout=10)
        self.assertEqual((issued.low, issued.high), (1, 32))
        before = stored(self.server.target, "orders")
        for fields in ({"node_tag": "A"}, {"node_tag": ""},
                       {"node_tag": "A", "range_token": 0}):
            with self.subTest(fields=fields):
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.ReturnRange(hilo_pb2.ReturnRangeRequest(
                        collection="orders", end=32, last=1, **fields),
                        timeout=10)
                self.assertEqual(cm.exception.code(),
                                 grpc.StatusCode.FAILED_PRECONDITION)
                self.assertIn("range_token", cm.exception.details())
                self.assertEqual(stored(self.server.target, "orders"),
                                 before)
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (33, 64, "A"))

    def test_failed_return_is_retried_on_the_same_node(self):
        c = self.client()
        spy = StubSpy(c)
        spy.fail_returns = ["before", "before"]
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        c.close()
        token = spy.next_replies[0].range_token
        self.assertEqual(len(spy.returns), 3)
        for request, _ in spy.returns:
            self.assertEqual((request.end, request.last, request.range_token),
                             (32, 1, token))
        reply = spy.returns[2][1]
        self.assertEqual((reply.applied, reply.max), (True, 1))
        self.assertEqual(self.logs, [])
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (2, 33, "A"))

    def test_retry_after_a_lost_reply_is_refused_and_reissues_nothing(self):
        c = self.client()
        spy = StubSpy(c)
        spy.fail_returns = ["after"]  # applied, but the client never hears
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        c.return_unused_ranges()
        self.assertEqual(len(spy.returns), 2)
        reply = spy.returns[1][1]
        self.assertEqual((reply.applied, reply.max), (False, 1))
        self.assertEqual(self.logs, [])
        self.assertEqual(stored(self.server.target, "orders")[:2], (1, 1))
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (2, 33, "A"))
        # The client did not see its return applied: it asks above its old
        # range (last_max 32), above 33 here, and its size doubles.
        self.assertEqual(c.next_id("orders"), Id(34, "A"))
        self.assertEqual((spy.next_replies[1].low, spy.next_replies[1].high),
                         (34, 97))

    def test_return_gives_up_after_three_attempts(self):
        c = self.client(rpc_deadline=2)
        spy = StubSpy(c)
        spy.fail_returns = ["before"] * 5
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        c.close()
        self.assertEqual(len(spy.returns), 3)
        self.assertEqual(len(self.logs), 1, self.logs)
        self.assertIn("returning numbers 2-32 of collection 'orders' failed: "
                      "UNAVAILABLE: ", self.logs[0])
        self.assertIn("ReturnRange failed 3 time(s) within 2 s",
                      self.logs[0])
        self.assertEqual(stored(self.server.target, "orders")[:2], (32, 0))
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (33, 64, "A"))

    def test_range_without_a_token_is_returned_once_never_retried(self):
        # A server older than tokens: replies carry none, returns need none.
        old = HiloServer("B", flags=["--allow_returns_without_token"])
        self.addCleanup(old.cleanup)
        c = self.client([old.target])
        spy = StubSpy(c)
        spy.range_token = 0
        self.assertEqual(c.next_id("orders"), Id(1, "B"))
        c.return_unused_ranges()
        self.assertEqual(len(spy.returns), 1)
        request, reply = spy.returns[0]
        self.assertEqual((request.last, request.range_token), (1, 0))
        self.assertEqual((reply.applied, reply.max), (True, 1))
        # Lost on the way: not sent again, since it could apply twice.
        spy.fail_returns = [None, "before"]
        self.assertEqual(c.next_id("orders"), Id(2, "B"))
        c.close()
        self.assertEqual(len(spy.returns), 2)
        self.assertEqual(len(self.logs), 1, self.logs)
        self.assertIn("failed 1 time(s)", self.logs[0])

    def test_node_tags_that_break_the_rule_are_refused(self):
        for tag in ["", "a", "ABCDE", "A-", "A B", "\u00c4", "A\n", "A\0",
                    "\uff21"]:
            with self.subTest(tag=tag):
                # A client of its own: one that took a range would hand out
                # its numbers without asking again.
                c = self.client()
                spy = StubSpy(c)
                spy.node_tag = tag
                for _ in range(2):  # and it keeps refusing
                    with self.assertRaises(HiloError) as cm:
                        c.next_id("orders")
                    self.assertEqual(cm.exception.code,
                                     grpc.StatusCode.INTERNAL)
                    self.assertIn(f"node tag {tag!r}; a tag is 1-4 "
                                  "characters of A-Z and 0-9",
                                  cm.exception.message)
                # Nothing was handed out: a good reply starts a new range.
                spy.node_tag = None
                self.assertEqual(c.next_id("orders").node_tag, "A")
                c.close()
        # Each client: two refused ranges of 32, then one of which it used
        # the first number and handed the rest back, so Max rose by 65.
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (9 * 65 + 1, 9 * 65 + 32, "A"))
        self.assertEqual(self.logs, [])

    def test_reply_that_breaks_the_contract_fails_over(self):
        # CONTRACT R9/R11: a refused reply counts as that target failing;
        # the next target is asked, and it answers the call.
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], prefetch_at=0)
        spy = StubSpy(c, 0)
        spy.node_tag = "ab!"
        self.assertEqual(c.next_id("o"), Id(1, "B"))
        self.assertEqual(c.next_id("o"), Id(2, "B"))
        self.assertEqual(len(spy.next_replies), 1)
        stats = c.stats()
        self.assertEqual((stats.failovers, stats.ranges_fetched),
                         (1, 1))
        # With every target's reply refused the call fails with INTERNAL,
        # naming each target and what it did.
        spy_b = StubSpy(c, 1)
        spy_b.node_tag = "b"
        with self.assertRaises(HiloError) as cm:
            c.next_id("p")
        self.assertEqual(cm.exception.code, grpc.StatusCode.INTERNAL)
        self.assertIn(f"{self.server.target}: NextRange replied with node "
                      f"tag 'ab!'", cm.exception.message)
        self.assertIn(f"{b.target}: NextRange replied with node tag 'b'",
                      cm.exception.message)
        self.assertEqual(self.logs, [])

    def test_range_at_or_below_the_last_from_that_node_is_refused(self):
        # CONTRACT R11: a range at or below the highest number the client
        # holds or handed out from that node would hand numbers out twice.
        c = self.client(prefetch_at=0)
        spy = StubSpy(c)
        self.assertEqual([c.next_id("o") for _ in range(32)],
                         [Id(n, "A") for n in range(1, 33)])
        for low, high in ((1, 32), (20, 83), (32, 95)):
            with self.subTest(low=low, high=high):
                def rewrite(reply, low=low, high=high):
                    reply.low, reply.high = low, high
                spy.rewrite = rewrite
                with self.assertRaises(HiloError) as cm:
                    c.next_id("o")
                self.assertEqual(cm.exception.code, grpc.StatusCode.INTERNAL)
                self.assertIn(f"{self.server.target}: NextRange replied "
                              f"with {low}-{high} of tag 'A', but the client "
                              f"has numbers up to 32 of that node",
                              cm.exception.message)
        spy.rewrite = None
        # The server issued 33-96, 97-160 and 161-224 for those replies
        # (each request reported 1-32, so each range had 64 numbers); none
        # of them is used, and the next range right above them is.
        self.assertEqual(c.next_id("o"), Id(225, "A"))
        stats = c.stats()
        self.assertEqual((stats.ranges_fetched, stats.failovers,
                          stats.errors), (2, 0, {grpc.StatusCode.INTERNAL: 3}))

    def test_range_below_the_last_fails_over_to_the_next_target(self):
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], prefetch_at=0)
        spy = StubSpy(c, 0)
        self.assertEqual([c.next_id("o") for _ in range(32)],
                         [Id(n, "A") for n in range(1, 33)])

        def replay_first(reply):
            reply.low, reply.high = 1, 32
        spy.rewrite = replay_first
        # B's range starts above the last_max the client reports.
        self.assertEqual(c.next_id("o"), Id(33, "B"))
        self.assertEqual(c.stats().failovers, 1)

    def test_after_an_applied_return_a_range_may_start_below_the_old_high(
            self):
        # CONTRACT R11's refinement: once the pair (33-96 fetched ahead,
        # then 1-32's tail after 10) is back, the node continues at 11,
        # below both highs the client held, and that range is accepted.
        c = self.client()  # prefetch_at 0.2
        self.assertEqual([c.next_id("o") for _ in range(10)],
                         [Id(n, "A") for n in range(1, 11)])
        self.assertEqual(c._prefetcher.run_all(), 1)  # 33-96 ahead
        c.return_unused_ranges()
        self.assertEqual(c.stats().returns_applied, 2)
        self.assertEqual(c.next_id("o"), Id(11, "A"))
        self.assertEqual(self.logs, [])

    def test_after_a_whole_return_the_mark_is_what_it_was_before(self):
        # A range handed back whole puts the mark back where it was before
        # the range was taken, not at its low - 1: here d's return of 34-64
        # came after c returned 65-128, the node's Max is 33, and its next
        # range for c, 34-, holds no number c handed out.
        c = self.client()  # prefetch_at 0.2
        d = self.client(prefetch_at=0)
        self.assertEqual([c.next_id("o") for _ in range(10)],
                         [Id(n, "A") for n in range(1, 11)])
        self.assertEqual(d.next_id("o"), Id(33, "A"))
        self.assertEqual(c._prefetcher.run_all(), 1)  # 65-128 ahead
        self.assertEqual([c.next_id("o") for _ in range(22)],
                         [Id(n, "A") for n in range(11, 33)])
        c.return_unused_ranges()
        self.assertEqual(c.stats().returns_applied, 1)
        d.return_unused_ranges()
        self.assertEqual(d.stats().returns_applied, 1)
        self.assertEqual(c.next_id("o"), Id(34, "A"))
        self.assertEqual(self.logs, [])

    def test_another_nodes_range_may_start_below_this_nodes_high(self):
        # The rule is per node: A's 1-32 (5 used) could not go back (A is
        # down), yet B may issue 6-37 (the client reports last_max 5): with
        # tag B those are other IDs.
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], prefetch_at=0,
                        rpc_deadline=2)
        self.assertEqual([c.next_id("o") for _ in range(5)],
                         [Id(n, "A") for n in range(1, 6)])
        self.assertEqual(self.server.stop(), 0)
        c.return_unused_ranges()
        self.assertEqual(c.stats().returns_failed, 1)
        self.assertEqual(c.next_id("o"), Id(6, "B"))
        self.assertEqual(len(self.logs), 1, self.logs)

    def test_four_character_tags_are_fine(self):
        node = HiloServer("AB12")
        self.addCleanup(node.cleanup)
        c = self.client([node.target])
        self.assertEqual(c.next_document_id("orders"), "orders/1-AB12")
        c.close()
        self.assertEqual(raw_next_range(node.target, "orders"),
                         (2, 33, "AB12"))

    def test_with_block_returns_the_unused_tail(self):
        with Client(self.server.target) as c:
            self.assertEqual([c.next_id("o").number for _ in range(3)],
                             [1, 2, 3])
        self.assertEqual(raw_next_range(self.server.target, "o"),
                         (4, 35, "A"))

    def test_client_stays_usable_after_returning_ranges(self):
        c = self.client()
        self.assertEqual([c.next_id("orders").number for _ in range(5)],
                         [1, 2, 3, 4, 5])
        c.return_unused_ranges()
        # Continues right after the numbers used; the request reported
        # last_max = 5, and the size still doubles (6-69).
        self.assertEqual(c.next_id("orders"), Id(6, "A"))
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (70, 101, "A"))
        c.return_unused_ranges()
        c.return_unused_ranges()  # nothing left: no call, no error
        self.assertEqual(self.logs, [])

    def test_refused_return_reissues_nothing(self):
        a = self.client()
        b = self.client()
        self.assertEqual(a.next_id("orders"), Id(1, "A"))   # holds 1-32
        self.assertEqual(b.next_id("orders"), Id(33, "A"))  # holds 33-64
        a.close()  # refused: 64 is Max, not 32
        b.close()  # applied: Max goes back to 33
        self.assertEqual(raw_next_range(self.server.target, "orders"),
                         (34, 65, "A"))
        self.assertEqual(self.logs, [])

    def test_failed_return_is_logged_not_raised(self):
        c = self.client(rpc_deadline=2)
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        self.assertEqual(self.server.stop(), 0)
        c.close()
        self.assertEqual(len(self.logs), 1, self.logs)
        self.assertIn("returning numbers 2-32 of collection 'orders' failed: "
                      "UNAVAILABLE: ", self.logs[0])
        self.assertIn("ReturnRanges failed 3 time(s)", self.logs[0])

    def test_close_sends_2500_collections_in_batches_of_1000(self):
        # A node that may create 2,500 collections within a minute.
        node = HiloServer(
            "A", flags=["--max_collection_creations_per_minute=0"])
        self.addCleanup(node.cleanup)
        c = self.client([node.target])
        spy = StubSpy(c, batches=True)
        names = [f"c{i}" for i in range(2500)]
        used = {name: i % 3 + 1 for i, name in enumerate(names)}
        for name in names:
            self.assertEqual([c.next_id(name) for _ in range(used[name])],
                             [Id(n, "A") for n in range(1, used[name] + 1)])
        tokens = {r.range_token for r in spy.next_replies}
        self.assertEqual(len(tokens), 2500)
        c.close()
        self.assertEqual(spy.returns, [])
        # Three calls, at most 1000 items each; every collection once.
        self.assertEqual(sorted(len(request.returns)
                                for request, _ in spy.batch_calls),
                         [500, 1000, 1000])
        items = {}
        for request, reply in spy.batch_calls:
            self.assertEqual(len(reply.results), len(request.returns))
            for item, result in zip(request.returns, reply.results):
                items[item.collection] = (
                    item.end, item.last, item.node_tag,
                    item.range_token in tokens, result.code, result.applied,
                    result.max)
        self.assertEqual(items, {
            name: (32, used[name], "A", True, 0, True, used[name])
            for name in names})
        self.assertEqual(self.logs, [])
        # A new client continues each collection right after the last
        # number used.
        d = self.client([node.target])
        self.assertEqual([d.next_id(name) for name in names],
                         [Id(used[name] + 1, "A") for name in names])

    def test_server_without_return_ranges_gets_single_returns(self):
        c = self.client()
        spy = StubSpy(c)  # ReturnRanges is UNIMPLEMENTED
        for n, name in enumerate(["a", "b", "c"], start=1):
            self.assertEqual([c.next_id(name) for _ in range(n)],
                             [Id(k, "A") for k in range(1, n + 1)])
        c.return_unused_ranges()
        self.assertEqual(len(spy.batch_calls), 1)
        self.assertEqual(
            [(r.collection, r.end, r.last)
             for r in spy.batch_calls[0][0].returns],
            [("a", 32, 1), ("b", 32, 2), ("c", 32, 3)])
        self.assertEqual(
            [(request.collection, request.end, request.last,
              request.range_token, reply.applied, reply.max)
             for request, reply in spy.returns],
            [(name, 32, n, spy.next_replies[n - 1].range_token, True, n)
             for n, name in enumerate(["a", "b", "c"], start=1)])
        # Once UNIMPLEMENTED, that node gets single returns from then on.
        self.assertEqual(c.next_id("a"), Id(2, "A"))
        c.close()
        self.assertEqual(len(spy.batch_calls), 1)
        self.assertEqual([(r.collection, r.last) for r, _ in spy.returns[3:]],
                         [("a", 2)])
        self.assertEqual(self.logs, [])
        d = self.client()
        self.assertEqual([d.next_id(name) for name in ["a", "b", "c"]],
                         [Id(3, "A"), Id(3, "A"), Id(4, "A")])

    def test_batch_with_a_tokenless_range_is_sent_once(self):
        old = HiloServer("B", flags=["--allow_returns_without_token"])
        self.addCleanup(old.cleanup)
        c = self.client([old.target])
        spy = StubSpy(c, batches=True)
        self.assertEqual(c.next_id("tokened"), Id(1, "B"))
        spy.range_token = 0  # as from a server older than tokens
        self.assertEqual(c.next_id("tokenless"), Id(1, "B"))
        spy.fail_batches = ["before"]
        c.close()
        # Lost on the way: not sent again, since it could apply twice.
        self.assertEqual(len(spy.batch_calls), 1)
        self.assertEqual(spy.returns, [])
        self.assertEqual(len(self.logs), 2, self.logs)
        for log, name in zip(self.logs, ["tokened", "tokenless"]):
            self.assertIn(f"returning numbers 2-32 of collection {name!r} "
                          "failed: UNAVAILABLE: ", log)
            self.assertIn("ReturnRanges failed 1 time(s)", log)
        self.assertEqual(raw_next_range(old.target, "tokenless"),
                         (33, 64, "B"))

    def test_batch_that_failed_unavailable_is_retried_applied_once(self):
        for fail, applied_by_retry in (("before", True), ("after", False)):
            with self.subTest(fail=fail):
                c = self.client()
                spy = StubSpy(c, batches=True)
                spy.fail_batches = [fail]
                names = [f"{fail}-x", f"{fail}-y"]
                self.assertEqual(c.next_id(names[0]), Id(1, "A"))
                self.assertEqual([c.next_id(names[1]) for _ in range(2)],
                                 [Id(1, "A"), Id(2, "A")])
                c.close()
                self.assertEqual(spy.returns, [])
                self.assertEqual(len(spy.batch_calls), 2)
                first, retry = spy.batch_calls
                self.assertEqual(first[0], retry[0])
                self.assertEqual(
                    [(r.collection, r.last, r.range_token)
                     for r in retry[0].returns],
                    [(names[0], 1, spy.next_replies[0].range_token),
                     (names[1], 2, spy.next_replies[1].range_token)])
                # After a lost reply the retry is refused: the token was
                # retired by the first, and Max stays at the last number.
                self.assertEqual(
                    [(r.code, r.applied, r.max) for r in retry[1].results],
                    [(0, applied_by_retry, 1), (0, applied_by_retry, 2)])
                self.assertEqual(stored(self.server.target, names[0])[:2],
                                 (1, 1))
                self.assertEqual(stored(self.server.target, names[1])[:2],
                                 (2, 2))
                self.assertEqual(self.logs, [])
                self.assertEqual(raw_next_range(self.server.target, names[0]),
                                 (2, 33, "A"))
                self.assertEqual(raw_next_range(self.server.target, names[1]),
                                 (3, 34, "A"))

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

    def test_close_hands_back_the_pair_in_one_call_before_anyone_cuts_in(self):
        # README "A pair of adjacent ranges": the range fetched ahead goes
        # back whole, then the tail of the current one, and both apply.
        # Another client asking right after the closing client's first
        # return call must not come between them (the tail would then be
        # refused and its numbers lost): it gets the numbers right after
        # the last one used.
        c = self.client()
        spy = StubSpy(c, batches=True)
        self.assertEqual([c.next_id("o") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        self.assertEqual(c._prefetcher.run_all(), 1)  # 33-96 ahead
        other = []

        def other_client_asks():
            if not other:
                other.append(raw_next_range(self.server.target, "o"))

        spy.after_return = other_client_asks
        c.close()
        self.assertEqual(other, [(8, 39, "A")])
        self.assertEqual(spy.returns, [])
        self.assertEqual(len(spy.batch_calls), 1)
        request, reply = spy.batch_calls[0]
        self.assertEqual(
            [(r.end, r.last, r.range_token) for r in request.returns],
            [(96, 32, spy.next_replies[1].range_token),
             (32, 7, spy.next_replies[0].range_token)])
        self.assertEqual([(r.code, r.applied, r.max) for r in reply.results],
                         [(0, True, 32), (0, True, 7)])
        stats = c.stats()
        self.assertEqual((stats.returns_applied, stats.returns_refused,
                          stats.returns_failed), (2, 0, 0))
        self.assertEqual(self.logs, [])

    def test_pair_goes_back_later_range_first_to_a_server_without_batches(
            self):
        c = self.client()
        spy = StubSpy(c)  # ReturnRanges is UNIMPLEMENTED
        self.assertEqual([c.next_id("o") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        self.assertEqual(c._prefetcher.run_all(), 1)  # 33-96 ahead
        c.close()
        self.assertEqual(
            [(q.end, q.last, r.applied, r.max) for q, r in spy.returns],
            [(96, 32, True, 32), (32, 7, True, 7)])
        self.assertEqual(raw_next_range(self.server.target, "o"),
                         (8, 39, "A"))
        self.assertEqual(self.logs, [])

    def test_retried_pair_after_a_lost_reply_counts_both_as_applied(self):
        c = self.client()
        spy = StubSpy(c, batches=True)
        spy.fail_batches = ["after"]  # both applied, the reply lost
        self.assertEqual([c.next_id("o") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        self.assertEqual(c._prefetcher.run_all(), 1)
        c.close()
        self.assertEqual(len(spy.batch_calls), 2)
        self.assertEqual(
            [(r.code, r.applied, r.max) for r in spy.batch_calls[1][1].results],
            [(0, False, 7), (0, False, 7)])
        stats = c.stats()
        self.assertEqual((stats.returns_applied, stats.returns_refused,
                          stats.returns_failed), (2, 0, 0))
        self.assertEqual(raw_next_range(self.server.target, "o"),
                         (8, 39, "A"))

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

    def test_prefetched_range_keeps_its_own_node_tag_and_node(self):
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], rpc_deadline=2)
        spy_a = StubSpy(c, 0, batches=True)
        StubSpy(c, 1, batches=True)
        self.assertEqual([c.next_id("x") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])
        # A stops answering NextRange: the prefetch fails over to B.
        real_a = spy_a._next

        def a_down(request, timeout=None):
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "A is down")

        c._source._targets[0].stub.NextRange = a_down
        self.assertEqual(c._prefetcher.run_all(), 1)
        self.assertEqual(c.stats().failovers, 1)
        # The rest of A's range keeps tag A; B's range comes with B's.
        self.assertEqual([c.next_id("x") for _ in range(8, 33)],
                         [Id(n, "A") for n in range(8, 33)])
        self.assertEqual(c.next_id("x"), Id(33, "B"))
        c._source._targets[0].stub.NextRange = real_a
        c.return_unused_ranges()
        # Only B's tail goes back (A's range is used up), to B.
        self.assertEqual(raw_next_range(b.target, "x")[0], 34)
        self.assertEqual(raw_next_range(self.server.target, "x")[0], 33)
        self.assertEqual(self.logs, [])

    def test_ranges_of_two_nodes_go_back_each_to_its_node(self):
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], rpc_deadline=2)
        self.assertEqual([c.next_id("x") for _ in range(7)],
                         [Id(n, "A") for n in range(1, 8)])

        def a_down(request, timeout=None):
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "A is down")

        real_a = c._source._targets[0].stub.NextRange
        c._source._targets[0].stub.NextRange = a_down
        self.assertEqual(c._prefetcher.run_all(), 1)  # 33-96 from B
        c._source._targets[0].stub.NextRange = real_a
        c.close()
        # B took its range back whole, A the tail after 7.
        self.assertEqual(raw_next_range(b.target, "x"), (33, 64, "B"))
        self.assertEqual(raw_next_range(self.server.target, "x"),
                         (8, 39, "A"))
        self.assertEqual(c.stats().returns_applied, 2)
        self.assertEqual(self.logs, [])

    def test_fail_over_keeps_each_number_with_its_tag(self):
        b = HiloServer("B")
        self.addCleanup(b.cleanup)
        c = self.client([self.server.target, b.target], rpc_deadline=2)
        self.assertEqual(c.next_id("x"), Id(1, "A"))
        self.assertEqual(self.server.stop(), 0)
        # The rest of A's range is still handed out, tagged A.
        self.assertEqual([c.next_id("x") for _ in range(31)],
                         [Id(n, "A") for n in range(2, 33)])
        # Then B answers; its range starts above the last one (last_max).
        self.assertEqual(c.next_id("x"), Id(33, "B"))
        self.assertEqual(c.next_id("x"), Id(34, "B"))
        self.assertEqual(c.next_document_id("x"), "x/35-B")
        # The tail goes back to B, which issued it (A is down).
        c.close()
        self.assertEqual(self.logs, [])
        self.assertEqual(raw_next_range(b.target, "x"), (36, 67, "B"))

    def test_all_targets_unavailable(self):
        dead = [unused_target(), unused_target()]
        c = self.client(dead, rpc_deadline=1)
        with self.assertRaises(HiloError) as cm:
            c.next_id("orders")
        self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)
        for target in dead:
            self.assertIn(target, str(cm.exception))
        # Waiting threads get the error too, and nobody hangs.
        errors = run_threads(4, lambda i: self._code_of(c, "orders"))
        self.assertEqual(errors, [grpc.StatusCode.UNAVAILABLE] * 4)

    @staticmethod
    def _code_of(c, collection):
        try:
            c.next_id(collection)
        except HiloError as e:
            return e.code
        return grpc.StatusCode.OK

    def test_fails_over_only_on_unavailable(self):
        c = self.client([unused_target(), self.server.target], rpc_deadline=2)
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        with self.assertRaises(HiloError) as cm:
            c.next_id("")
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(self.server.target, str(cm.exception))

    def test_ids_never_collide_with_the_cpp_client(self):
        dump = os.environ.get("HILO_CPP_ID_DUMP", "")
        if not dump:
            self.skipTest("HILO_CPP_ID_DUMP not set")
        collection = "shared"
        per_side = 6000
        rounds = 6
        py_threads = 4
        # C++: 4 threads on one client, a new client each of 6 rounds (each
        # hands its tail back), meanwhile the same from Python.
        cpp = subprocess.Popen(
            [dump, self.server.target, collection, str(per_side), "4",
             str(rounds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def python_side(i):
            ids = []
            for _ in range(rounds):
                with Client(self.server.target) as c:
                    for _ in range(per_side // (rounds * py_threads)):
                        ids.append(c.next_document_id(collection))
            return ids

        py_ids = [x for ids in run_threads(py_threads, python_side)
                  for x in ids]
        out, err = cpp.communicate(timeout=120)
        self.assertEqual(cpp.returncode, 0, err)
        cpp_ids = out.split()
        self.assertEqual(len(cpp_ids), per_side)
        self.assertEqual(len(py_ids), per_side)
        pattern = re.compile(r"^shared/[1-9][0-9]*-A$")
        for id_ in cpp_ids + py_ids:
            self.assertRegex(id_, pattern)
        self.assertEqual(len(set(cpp_ids)), per_side)
        self.assertEqual(len(set(py_ids)), per_side)
        self.assertEqual(set(cpp_ids) & set(py_ids), set())


if __name__ == "__main__":
    unittest.main()
