"""What the Python client's tests share: raw calls to a node beside the
client, a spy on a client's stub, a prefetcher the test runs by hand,
threads started together, and the base class of the tests that run against
a real hilo_server."""

import threading
import unittest

import grpc

from hilo.v1 import hilo_pb2, hilo_pb2_grpc
from hilo_client import Client
from server import HiloServer


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


class ServerTestCase(unittest.TestCase):
    """A test against this test's own hilo_server (tag A), with the lines
    its clients log in self.logs."""

    def setUp(self):
        self.server = HiloServer("A")
        self.addCleanup(self.server.cleanup)
        self.logs = []

    def client(self, targets=None, manual_prefetch=True, **kw):
        """A client of `targets` (this test's server by default). Unless
        manual_prefetch is False, its prefetch tasks wait in
        c._prefetcher (a ManualPrefetcher) until the test runs them."""
        c = Client(targets or [self.server.target], log=self.logs.append, **kw)
        if manual_prefetch and c._prefetcher is not None:
            c._prefetcher = ManualPrefetcher()
        self.addCleanup(c.close)
        return c
