"""The fork gate: no fork() while a hilo call is in flight, if it can wait.

gRPC's Python core (grpcio 1.51, fork support off) does not survive a fork
taken while another thread has a call in flight: the child's own first call,
on a channel made after the fork, never answers, whatever its deadline. So
every gRPC call this package makes passes through one process-wide gate,
and os.register_at_fork's `before` handler holds the fork until the calls
in flight are answered or their deadlines have passed (so the wait is
bounded by the longest deadline in flight), with new calls held back
meanwhile. A child forked with a call still in flight (one past its
deadline and still not back) cannot use gRPC: every call there fails at
once with FAILED_PRECONDITION saying why, instead of waiting for ever
(CONTRACT.md R16). Calls made by other libraries in the same process are
not seen here. Private to hilo_client."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import grpc

from hilo_client._values import HiloError

# How long after the latest deadline in flight the fork still waits for
# that call's answer (gRPC gives up on a call at its deadline; its thread
# needs a moment to come back).
_GRACE = 0.5


class _ForkGate:
    """Counts the calls in flight and holds fork() until they are done."""

    def __init__(self) -> None:
        # Taken with `with self._lock` (_range_cache.py says why).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._in_flight = 0
        self._latest_end = 0.0  # monotonic: the latest deadline in flight
        self._forking = False
        # Set in a child forked with a call in flight: gRPC is unusable.
        self._broken = False
        # The fork under way leaves a call in flight behind.
        self._fork_unsafe = False

    @contextmanager
    def call(self, timeout: float) -> Iterator[None]:
        """Around one gRPC call of at most `timeout` seconds. Waits while a
        fork is being taken (at most the fork's own bounded wait); raises
        HiloError(FAILED_PRECONDITION) in a child forked with a call in
        flight."""
        with self._lock:
            while self._forking:
                self._cond.wait()
            if self._broken:
                raise HiloError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "this process was forked while a hilo call was in "
                    "flight and stayed unanswered past its deadline; gRPC "
                    "cannot make calls in it (grpcio does not survive such "
                    "a fork): fork while no call is in flight, or start "
                    "worker processes with multiprocessing's 'spawn' or "
                    "'forkserver' method")
            self._in_flight += 1
            self._latest_end = max(self._latest_end,
                                   time.monotonic() + timeout)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._cond.notify_all()

    def before_fork(self) -> None:
        with self._lock:
            self._forking = True
            give_up_at = self._latest_end + _GRACE
            while self._in_flight > 0:
                left = give_up_at - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._fork_unsafe = self._in_flight > 0

    def after_fork_in_parent(self) -> None:
        with self._lock:
            self._forking = False
            self._cond.notify_all()

    def after_fork_in_child(self) -> None:
        # The only thread: the calls in flight belong to threads the child
        # does not have, and the lock may have been held by one of them.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._in_flight = 0
        self._latest_end = 0.0
        self._forking = False
        self._broken = self._broken or self._fork_unsafe


FORK_GATE = _ForkGate()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=FORK_GATE.before_fork,
                        after_in_parent=FORK_GATE.after_fork_in_parent,
                        after_in_child=FORK_GATE.after_fork_in_child)
