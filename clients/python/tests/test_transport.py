"""Tests of hilo_client._transport (_GrpcRangeSource): the replies it
refuses (node tags, ranges at or below the last from a node), failover
between targets, and the deadlines and cutting of its return calls."""

import os
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hilo.v1 import hilo_pb2  # noqa: E402
from hilo_client import HiloError, Id  # noqa: E402
from fixtures import (  # noqa: E402
    raw_next_range, FakeRpcError, StubSpy, run_threads, ServerTestCase)
from server import HiloServer, unused_target  # noqa: E402


class TransportWithoutServerTest(unittest.TestCase):
    """What needs no server: the return calls' clock and how returns are
    cut into calls."""

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


class TransportTest(ServerTestCase):

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

    def test_four_character_tags_are_fine(self):
        node = HiloServer("AB12")
        self.addCleanup(node.cleanup)
        c = self.client([node.target])
        self.assertEqual(c.next_document_id("orders"), "orders/1-AB12")
        c.close()
        self.assertEqual(raw_next_range(node.target, "orders"),
                         (2, 33, "AB12"))

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

    def test_range_overlapping_what_the_client_has_of_that_node_is_refused(
            self):
        # CONTRACT R11: a range overlapping numbers the client holds or
        # handed out from that node would hand numbers out twice.
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
                              f"with {low}-{high} of tag 'A', which overlaps "
                              f"1-32, numbers the client holds or handed out "
                              f"of that node",
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
        # A node's refusal (here: a new collection past its limit) is its
        # answer, passed on with its name; the next target is not asked.
        limited = HiloServer("L", flags=["--max_collections=1"])
        self.addCleanup(limited.cleanup)
        c = self.client([unused_target(), limited.target, self.server.target],
                        rpc_deadline=2)
        self.assertEqual(c.next_id("orders"), Id(1, "L"))
        with self.assertRaises(HiloError) as cm:
            c.next_id("other")
        self.assertEqual(cm.exception.code,
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn(limited.target, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
