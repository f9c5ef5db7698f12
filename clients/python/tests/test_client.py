"""Tests of hilo_client.Client, the facade: its options, the IDs and
document IDs it hands out, close and the with block, against a real
hilo_server where a server is needed.

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

from hilo_client import Client, ClientStats, HiloError, Id  # noqa: E402
from fixtures import raw_next_range, run_threads, ServerTestCase  # noqa: E402
from server import HiloServer  # noqa: E402
from server import unused_target  # noqa: E402


class ClientWithoutServerTest(unittest.TestCase):
    """What needs no server: options refused at construction, names,
    channel options and stats names."""

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


class ClientTest(ServerTestCase):

    def test_a_call_after_close_is_failed_precondition(self):
        # CONTRACT.md R13: a call on a closed client fails with
        # FAILED_PRECONDITION, as in Go, Java and Node, naming the client's
        # state and the collection; still a RuntimeError, as it was before.
        c = Client([self.server.target], prefetch_at=0)
        self.assertEqual(c.next_id("used"), Id(1, "A"))
        c.close()
        for call, collection in ((c.next_id, "used"), (c.next_id, "new"),
                                 (c.next_document_id, "used")):
            with self.subTest(call=call.__name__, collection=collection):
                with self.assertRaises(HiloError) as cm:
                    call(collection)
                self.assertEqual(cm.exception.code,
                                 grpc.StatusCode.FAILED_PRECONDITION)
                self.assertEqual(
                    cm.exception.message,
                    f"the hilo client is closed; no more IDs of collection "
                    f"{collection!r} (make a new Client)")
                self.assertIsInstance(cm.exception, RuntimeError)
        self.assertEqual(c.stats().ranges_fetched, 1)

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
                # Twice: a refused name leaves nothing behind that a
                # second call could take for a checked one.
                for _ in range(2):
                    with self.assertRaises(HiloError) as cm:
                        c.next_id(bad)
                    self.assertEqual(cm.exception.code,
                                     grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            c.next_id(b"orders")
        # 256 bytes is still fine, and the client stays usable.
        self.assertEqual(c.next_id("y" * 256), Id(1, "A"))
        self.assertEqual(c.next_id("orders"), Id(1, "A"))

    def test_names_no_node_takes_are_refused_and_keep_nothing(self):
        # CONTRACT.md R19, judged by the client before it keeps anything: a
        # caller naming many collections no node takes (names from its own
        # callers, say) must not grow the client, nor reach a node.
        c = self.client()
        self.assertEqual(c.next_id("kept"), Id(1, "A"))
        refused = ["", "a\x00b", "a\x1f", "a\x7f", "a\x80", "a\x9f",
                   "lone\ud800", "x" * 257, "\u00e9" * 129]
        refused += [f"bad\x01{i}" for i in range(200)]
        for bad in refused:
            with self.subTest(bad=bad[:20]):
                with self.assertRaises(HiloError) as cm:
                    c.next_id(bad)
                self.assertEqual(cm.exception.code,
                                 grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("a collection is 1-256 bytes of UTF-8 without "
                              "control characters", cm.exception.message)
        self.assertEqual(list(c._caches), ["kept"])
        stats = c.stats()
        self.assertEqual(stats.errors, {})  # no fetch failed
        self.assertEqual(stats.ranges_fetched, 1)
        self.assertEqual(c.next_id("kept"), Id(2, "A"))
        # The edges of the rule, which the node takes.
        for name in ["y" * 256, "\u00e9" * 128, "a\xa0", "a~",
                     "a\U0010ffff"]:
            self.assertEqual(c.next_id(name), Id(1, "A"))
        # An unbounded name is never copied whole into a message.
        with self.assertRaises(HiloError) as cm:
            c.next_id("z" * 1_000_000)
        self.assertLess(len(cm.exception.message), 200)
        c.close()
        with self.assertRaises(HiloError) as cm:
            c.next_id("z" * 1_000_000)
        self.assertLess(len(cm.exception.message), 200)

    def test_a_caller_that_finds_a_forgotten_collection_looks_again(self):
        # Another caller's failure has just forgotten the collection, which
        # is still in the client's table.
        server = HiloServer("L", flags=["--max_collections=1"])
        self.addCleanup(server.cleanup)
        c = self.client([server.target])
        self.assertEqual(c.next_id("first"), Id(1, "L"))
        with self.assertRaises(HiloError):
            c.next_id("second")  # past the limit
        self.assertEqual(list(c._caches), ["first"])
        c._cache_for("late")
        self.assertTrue(c._caches["late"].forget_if_unused())
        with self.assertRaises(HiloError):
            c.next_id("late")  # a new cache, refused again
        self.assertEqual(list(c._caches), ["first"])
        self.assertEqual(c.stats().errors,
                         {grpc.StatusCode.RESOURCE_EXHAUSTED: 2})
        # One that received a range is never forgotten.
        self.assertFalse(c._caches["first"].forget_if_unused())

    def test_a_collection_refused_for_the_limit_is_not_kept(self):
        server = HiloServer("L", flags=["--max_collections=1"])
        self.addCleanup(server.cleanup)
        c = self.client([server.target])
        self.assertEqual(c.next_id("first"), Id(1, "L"))
        for i in range(50):
            with self.assertRaises(HiloError) as cm:
                c.next_id(f"new{i}")
            self.assertEqual(cm.exception.code,
                             grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(list(c._caches), ["first"])
        self.assertEqual(c.stats().errors,
                         {grpc.StatusCode.RESOURCE_EXHAUSTED: 50})

    def test_waiters_on_a_refused_collection_are_all_counted(self):
        # 8 callers on one new collection the node refuses: one fetches,
        # the others wait and share its error; the collection is forgotten
        # only once all of them are done, so every wait is counted.
        server = HiloServer("L", flags=["--max_collections=1"])
        self.addCleanup(server.cleanup)
        c = self.client([server.target])
        self.assertEqual(c.next_id("first"), Id(1, "L"))
        waited_before = c.stats().calls_waited
        for round_ in range(10):
            codes = run_threads(8, lambda i: self._code_of(
                lambda: c.next_id(f"new{round_}")))
            self.assertEqual(codes, [grpc.StatusCode.RESOURCE_EXHAUSTED] * 8)
        self.assertEqual(list(c._caches), ["first"])
        stats = c.stats()
        self.assertEqual(stats.calls_waited - waited_before, 80)
        # Each round fetched at least once (the callers may not all have
        # overlapped) and at most 8 times.
        failed = stats.errors[grpc.StatusCode.RESOURCE_EXHAUSTED]
        self.assertTrue(10 <= failed <= 80, failed)

    @staticmethod
    def _code_of(call):
        try:
            call()
        except HiloError as e:
            return e.code
        return None

    def test_a_str_subclass_is_taken_by_its_characters(self):
        class LooksLikeOrders(str):
            """A name that claims to be "orders" for hashing, comparison
            and formatting, whatever its characters."""

            def __eq__(self, other):
                return other == "orders"

            def __hash__(self):
                return hash("orders")

            def __format__(self, spec):
                return "orders"

        c = self.client()
        self.assertEqual(c.next_id("orders"), Id(1, "A"))
        # Not a cache's name by its characters: checked and refused.
        with self.assertRaises(HiloError) as cm:
            c.next_id(LooksLikeOrders("lone\ud800surrogate"))
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        # A subclass that redefines nothing is its characters.
        class Name(str):
            pass

        self.assertEqual(c.next_document_id(Name("orders")), "orders/2-A")
        self.assertEqual(c.next_document_id(LooksLikeOrders("users")),
                         "users/1-A")

    def test_with_block_returns_the_unused_tail(self):
        with Client(self.server.target) as c:
            self.assertEqual([c.next_id("o").number for _ in range(3)],
                             [1, 2, 3])
        self.assertEqual(raw_next_range(self.server.target, "o"),
                         (4, 35, "A"))

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
