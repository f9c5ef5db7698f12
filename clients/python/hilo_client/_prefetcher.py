"""_Prefetcher: the one background thread per client that fetches ranges
ahead of need. Private to hilo_client."""

from __future__ import annotations

import collections
import threading
from typing import Callable, Deque, Optional


class _Prefetcher:
    """One background thread that runs prefetch tasks in the order given, so
    that next_id never waits on the network to fetch ahead. Started with the
    first task; stop() drops the queued tasks and waits (bounded) for the
    running one. Thread-safe."""

    def __init__(self):
        # Taken with `with self._lock` (_range_cache.py says why).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._tasks: Deque[Callable[[], None]] = collections.deque()
        self._stopping = False
        self._thread: Optional[threading.Thread] = None

    def schedule(self, task: Callable[[], None]) -> None:
        """Queues `task`; dropped after stop()."""
        with self._lock:
            if self._stopping:
                return
            self._tasks.append(task)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hilo-prefetch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._cond.wait_for(lambda: self._tasks or self._stopping)
                if self._stopping:
                    return
                task = self._tasks.popleft()
            task()

    def stop(self, timeout: float) -> None:
        """Drops the queued tasks and waits up to `timeout` seconds for the
        running one. Idempotent."""
        with self._lock:
            self._stopping = True
            self._tasks.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
