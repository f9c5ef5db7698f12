"""A real hilo_server for tests: port 0, a temporary database, SIGTERM on
stop. The binary comes from $HILO_SERVER_BIN."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

_PORT_LINE = re.compile(rb"^hilo_server: serving node \S+ on port (\d+)",
                        re.MULTILINE)


def server_binary() -> str:
    path = os.environ.get("HILO_SERVER_BIN", "")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(
            "set HILO_SERVER_BIN to a built hilo_server binary "
            f"(got {path!r})")
    return path


class HiloServer:
    """Starts on construction; stop() (or the context manager) ends it."""

    def __init__(self, tag: str = "A", db_dir: str = None, flags=()):
        """flags: more hilo_server flags, e.g.
        ["--allow_returns_without_token"]."""
        self.tag = tag
        self._own_dir = db_dir is None
        self.dir = db_dir or tempfile.mkdtemp(prefix="hilo-pytest.")
        self._log_path = os.path.join(self.dir, f"server-{tag}.log")
        self._log = open(self._log_path, "wb")
        self.process = subprocess.Popen(
            [server_binary(), "--listen=127.0.0.1:0",
             "--metrics_listen=127.0.0.1:0",
             f"--db={os.path.join(self.dir, 'hilo.db')}", "--create_db",
             f"--node_tag={tag}", *flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log)
        self.port = self._wait_for_port()
        self.target = f"127.0.0.1:{self.port}"

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with open(self._log_path, "rb") as f:
                m = _PORT_LINE.search(f.read())
            if m:
                return int(m.group(1))
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        with open(self._log_path, "rb") as f:
            log = f.read().decode(errors="replace")
        # The constructor fails, so no caller will ever clean up after it.
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError("hilo_server did not start: " + log)

    def stop(self) -> int:
        """SIGTERM, then the exit status (SIGKILL after 10 s)."""
        status = self.process.poll()
        if status is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                status = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                status = self.process.wait()
        self._log.close()
        return status

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def unused_target() -> str:
    """An address where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"
