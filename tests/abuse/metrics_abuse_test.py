"""The abuse suite's attack on the metrics endpoint: slow clients that
hold its connections open.

Usage: metrics_abuse_test.py ATTACK HILO_SERVER [--long]

Each attack runs against a real hilo_server beside a well-behaved bystander
and asserts what docs/security.md promises (abuse_lib.Checks)."""
import socket
import sys
import threading
import time
import urllib.request

import abuse_lib as lib
from abuse_lib import LONG


def metrics_slowloris(binary):
    """Half-sent HTTP requests on the metrics port, reopened as soon as
    they are dropped: scrapes must still answer."""
    checks = lib.Checks("metrics_slowloris")
    server = lib.Server(binary)
    stop = threading.Event()

    def attack():
        held = []
        while not stop.is_set():
            while len(held) < 6:
                try:
                    s = socket.create_connection(
                        ("127.0.0.1", server.metrics_port), timeout=1)
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                    held.append(s)
                except OSError:
                    break
            time.sleep(0.05)
            alive = []
            for s in held:
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            held = alive
        for s in held:
            s.close()

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    time.sleep(0.5)
    latencies = []
    for _ in range(10 if not LONG else 60):
        start = time.monotonic()
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{server.metrics_port}/metrics",
                    timeout=5) as reply:
                reply.read()
            latencies.append(time.monotonic() - start)
        except OSError:
            latencies.append(None)
        time.sleep(0.3)
    stop.set()
    attacker.join()
    checks.figure("scrapes", lib.summary(latencies))
    checks.expect(all(l is not None and l < 1.0 for l in latencies),
                  f"a scrape failed or took over a second: {latencies}")
    rc, took = server.terminate()
    checks.expect(rc == 0, f"SIGTERM: exit {rc}")
    server.close()
    checks.finish()


ATTACKS = {f.__name__: f for f in (
    metrics_slowloris,)}

if __name__ == "__main__":
    ATTACKS[sys.argv[1]](sys.argv[2])
