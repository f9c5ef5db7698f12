"""What the tests of tests/monitoring share: processes that die with the
test, bounded polling, and a hilo_server on free ports."""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


class Failure(Exception):
    pass


class Test:
    """A test's name (for its log lines) and the processes it started,
    stopped by stop() whatever happened; each also dies with the test if
    the test is killed (PR_SET_PDEATHSIG)."""

    def __init__(self, name):
        self.name = name
        self.processes = []
        # ctest's timeout and Ctrl-C: unwind through the callers' finally.
        signal.signal(signal.SIGTERM, self._terminated)

    def _terminated(self, *_):
        self.log("FAIL: stopped by SIGTERM (a timeout?)")
        sys.exit(1)

    def run(self, body):
        """body(work) with a temporary folder `work`; the exit status: 0
        if it returned, 1 (after a line naming the failure) if it raised
        Failure. Processes and the folder are gone afterwards."""
        work = tempfile.mkdtemp(prefix=f"hilo-{self.name}-")
        try:
            body(work)
            self.log("PASS")
            return 0
        except (Failure, subprocess.TimeoutExpired, OSError) as e:
            self.log(f"FAIL: {e}")
            return 1
        finally:
            self.stop()
            shutil.rmtree(work, ignore_errors=True)

    def log(self, message):
        sys.stdout.write(f"{self.name}: {message}\n")
        sys.stdout.flush()

    def start(self, args, output):
        """Starts args with stdout and stderr into the file `output`."""
        with open(output, "w") as out:
            process = subprocess.Popen(args, stdout=out, stderr=out,
                                       preexec_fn=_die_with_parent)
        self.processes.append(process)
        return process

    def stop(self):
        for p in self.processes:
            if p.poll() is None:
                p.terminate()
        for p in self.processes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def start_hilo_server(self, server_bin, work, *flags):
        """A hilo_server on 127.0.0.1:0 with its database in `work`; its
        (gRPC port, metrics port or None)."""
        output = os.path.join(work, "hilo_server.log")
        server = self.start(
            [server_bin, "--listen=127.0.0.1:0",
             f"--db={os.path.join(work, 'hilo.db')}", "--create_db", *flags],
            output)
        started = wait_for(
            "hilo_server start",
            lambda: re.search(r"on port (\d+) .*metrics (?:port (\d+)|off)",
                              read(output)),
            time.monotonic() + 30, server, output)
        self.log(f"hilo_server: gRPC {started.group(1)}, metrics "
                 f"{started.group(2)}")
        return started.group(1), started.group(2)


def _die_with_parent():
    # PR_SET_PDEATHSIG: SIGKILL the child if the test dies first.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        return f"({e})"


def wait_for(what, predicate, deadline, process=None, output=None):
    """Polls predicate() until it returns something true, and returns it;
    Failure naming `what` at the deadline or if `process` exits."""
    while True:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise Failure(f"{what}: the process exited with status "
                          f"{process.returncode}; its output:\n"
                          f"{read(output)}")
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not in time")
        time.sleep(0.2)
