"""Driver: one client's conformance driver process, spoken to in JSON lines
(PROTOCOL.md), with a bound on every answer. The per-language drivers live
in drivers/<lang>/."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from typing import Dict, List, Optional, Tuple

from outcomes import Failure
from processes import Watchdog, children_by_parent

# How long the runner waits for any one driver answer, unless a step says.
ANSWER_TIMEOUT_S = 30.0


def _start_time(pid: int) -> Optional[int]:
    """When the process started (clock ticks since boot), or None if it is
    gone: with its pid, it names one process even if the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2:].split()[19])


def _descendants(pid: int) -> List[Tuple[int, int]]:
    """Every process under pid, each with its start time."""
    children = children_by_parent()
    out, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        started = _start_time(child)
        if started is not None:
            out.append((child, started))
        todo.extend(children.get(child, []))
    return out


class Driver:
    """One driver process (one client), spoken to in JSON lines."""

    def __init__(self, command: List[str], name: str, log_dir: str,
                 env: Optional[Dict[str, str]] = None):
        self.name = name
        self.stderr_path = os.path.join(log_dir, f"driver-{name}.log")
        self._stderr = open(self.stderr_path, "w")
        self.stuck = False  # it did not answer in time: kill, do not wait
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, bufsize=1,
            env=dict(os.environ, **env) if env else None)
        Watchdog.record(self.proc.pid)
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        # Answers to requests sent with an "id" (PROTOCOL.md: requests in
        # flight at once), by that id; every other answer, in order, above.
        self._tagged: Dict[str, "queue.Queue[Optional[str]]"] = {}
        self._tagged_lock = threading.Lock()
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.separator = "/"
        self.targets: List[str] = []

    def _queue(self, call_id: str) -> "queue.Queue[Optional[str]]":
        with self._tagged_lock:
            return self._tagged.setdefault(call_id, queue.Queue())

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                call_id = json.loads(line).get("id")
            except (ValueError, AttributeError):
                call_id = None
            if isinstance(call_id, str):
                self._queue(call_id).put(line)
            else:
                self._lines.put(line)
        self._lines.put(None)
        with self._tagged_lock:
            for q in self._tagged.values():
                q.put(None)

    def call(self, request: Dict, timeout: float = ANSWER_TIMEOUT_S,
             call_id: Optional[str] = None) -> Dict:
        """Sends one request and waits for its answer. With call_id, the
        request carries that "id": the driver starts it at once and goes on
        reading requests, so that several can be in flight; its answer,
        whenever it comes, carries the same id (PROTOCOL.md)."""
        lines = self._lines
        if call_id is not None:
            request = dict(request, id=call_id)
            lines = self._queue(call_id)
        try:
            with self._write_lock:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Failure(f"driver {self.name} is gone (exit status "
                          f"{self.proc.poll()}); its stderr: {self.tail()}")
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            self.stuck = True
            raise Failure(f"driver {self.name} did not answer "
                          f"{request['op']} within {timeout:g} s")
        if line is None:
            lines.put(None)  # for the next caller waiting on it
            raise Failure(f"driver {self.name} exited (status "
                          f"{self.proc.wait(5)}) on {request['op']}; its "
                          f"stderr: {self.tail()}")
        try:
            answer = json.loads(line)
        except ValueError:
            raise Failure(f"driver {self.name} answered {request['op']} "
                          f"with a line that is not JSON: {line.strip()!r}")
        if not isinstance(answer, dict) or not isinstance(
                answer.get("ok"), bool):
            raise Failure(f"driver {self.name} answered {request['op']} "
                          f"without a boolean ok: {line.strip()!r}")
        answer.pop("id", None)
        return answer

    def tail(self) -> str:
        self._stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()[-2000:].strip()

    def stop(self) -> None:
        # A child the driver forked (the fork step) that hangs outlives the
        # driver; known now, killed below once the driver is gone.
        children = _descendants(self.proc.pid)
        self._stop()
        for pid, started in children:
            if _start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _stop(self) -> None:
        if self.stuck and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.poll() is None:
            try:
                with self._write_lock:
                    self.proc.stdin.write('{"op": "exit"}\n')
                    self.proc.stdin.flush()
                    self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._stderr.close()
