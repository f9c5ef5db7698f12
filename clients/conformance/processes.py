"""The processes a scenario runs besides its drivers: hilo_server nodes
(Node: start on a free port, kill, pause, restart on the same port), the
fault loop that takes them down while a step runs (FaultLoop), and the
Watchdog that kills them all if the runner itself is killed. Used by run.py
and draw_together.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional

from outcomes import Failure


def children_by_parent() -> Dict[int, List[int]]:
    """Every process's children, by parent pid, as /proc lists them now."""
    out: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


# How long a hilo_server may take to print the port it serves on.
NODE_START_S = 30.0


class Watchdog:
    """Cleans up after a runner that dies without doing it (ctest's SIGKILL
    on a timeout): a shell outside the runner's process group waits for the
    runner to go, then kills every child process recorded and removes the
    work directory. A normal run cleans up by itself first."""

    pids_file: Optional[str] = None

    @classmethod
    def start(cls, work: str) -> None:
        cls.pids_file = os.path.join(work, "pids")
        open(cls.pids_file, "w").close()
        script = ('while kill -0 "$0" 2>/dev/null; do sleep 1; done; '
                  'for p in $(cat "$1" 2>/dev/null); do '
                  'kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null; '
                  'rm -rf "$2"')
        subprocess.Popen(["/bin/sh", "-c", script, str(os.getpid()),
                          cls.pids_file, work],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

    @classmethod
    def record(cls, pid: int) -> None:
        if cls.pids_file:
            with open(cls.pids_file, "a") as f:
                f.write(f"{pid}\n")


# -- servers ----------------------------------------------------------------


def _all_threads_stopped(tasks: str) -> bool:
    """True if every thread under /proc/PID/task is stopped (state T or t
    after the command's closing parenthesis in its stat)."""
    try:
        tids = os.listdir(tasks)
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"{tasks}/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the thread has exited
        state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
        if state not in (b"T", b"t"):
            return False
    return bool(tids)

class Node:
    """One hilo_server child: started on a free port, then restarted on the
    same port (clients keep their targets) with the same database."""

    def __init__(self, server: str, tmp: str, name: str, tag: str,
                 flags: List[str]):
        self.server, self.name, self.tag = server, name, tag
        self.flags = list(flags)
        self.dir = os.path.join(tmp, f"node-{name}")
        os.makedirs(self.dir)
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        # Only the first start makes the database; a restart must find it.
        self.create_db = True
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        log_path = os.path.join(self.dir, "server.log")
        log = open(log_path, "a")
        offset = log.tell()
        self.proc = subprocess.Popen(
            [self.server, f"--listen=127.0.0.1:{self.port}",
             "--metrics_listen=", f"--db={self.dir}/hilo.db",
             f"--node_tag={self.tag}"]
            + (["--create_db"] if self.create_db else []) + self.flags,
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        Watchdog.record(self.proc.pid)
        self.create_db = False
        log.close()
        # Far above a start on a loaded machine (well under 1 s): reached
        # only by a server that cannot start.
        deadline = time.monotonic() + NODE_START_S
        pattern = re.compile(r"serving node \S+ on port (\d+)")
        while time.monotonic() < deadline:
            with open(log_path) as f:
                f.seek(offset)
                m = pattern.search(f.read())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        with open(log_path) as f:
            f.seek(offset)
            text = f.read()
        self.stop()
        raise Failure(f"hilo_server node {self.name} did not start on port "
                      f"{self.port or 'any'} within {NODE_START_S:g} s; its "
                      f"log: {text.strip()}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP, then wait (up to 5 s) until every thread of the node is
        stopped: the kernel stops them asynchronously, and a request sent at
        once could still be answered."""
        self.proc.send_signal(signal.SIGSTOP)
        tasks = f"/proc/{self.proc.pid}/task"
        give_up = time.monotonic() + 5
        while not _all_threads_stopped(tasks):
            if time.monotonic() > give_up:
                raise Failure(f"hilo_server node {self.name} not stopped 5 s "
                              "after SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)



class FaultLoop(threading.Thread):
    """Kills nodes with SIGKILL (kind "kill"), pauses them with SIGSTOP
    ("stop"), or each in turn ("kill_and_stop": odd rounds kill, even rounds
    pause) while a step runs: each round takes the next node of `nodes` down
    for `down_ms`, brings it back (restart on its port, or SIGCONT), then
    waits `up_ms`. One node at a time, so another is up."""

    def __init__(self, nodes: Dict[str, Node], spec: Dict):
        super().__init__(daemon=True)
        self.nodes = [nodes[n] for n in spec["nodes"]]
        self.kind = spec.get("kind", "kill")
        self.down = spec.get("down_ms", 300) / 1000.0
        self.up = spec.get("up_ms", 300) / 1000.0
        self.first = spec.get("first_ms", 200) / 1000.0
        self._done = threading.Event()
        self.rounds = 0
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            if self._done.wait(self.first):
                return
            while True:
                node = self.nodes[self.rounds % len(self.nodes)]
                self.rounds += 1
                kill = self.kind == "kill" or (
                    self.kind == "kill_and_stop" and self.rounds % 2 == 1)
                if kill:
                    node.kill()
                else:
                    node.pause()
                self._done.wait(self.down)
                if kill:
                    node.start()
                else:
                    node.resume()
                if self._done.wait(self.up):
                    return
        except BaseException as e:  # reported by stop()
            self.error = e

    def stop(self) -> None:
        self._done.set()
        self.join(30)
        if self.error:
            raise Failure(f"fault loop: {self.error}")
