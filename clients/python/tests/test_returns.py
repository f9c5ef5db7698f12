"""Tests of handing ranges back (Client.close and return_unused_ranges,
through _RangeCache.take_unused and _GrpcRangeSource.return_many): range
tokens, retries, batches of ReturnRanges, the adjacent pair, and what the
node continues with afterwards."""

import os
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hilo.v1 import hilo_pb2  # noqa: E402
from hilo_client import Id  # noqa: E402
from fixtures import (  # noqa: E402
    raw_next_range, raw_stub, raw_return, stored, FakeRpcError, StubSpy,
    ServerTestCase)
from server import HiloServer  # noqa: E402


class ReturnsTest(ServerTestCase):

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


if __name__ == "__main__":
    unittest.main()
