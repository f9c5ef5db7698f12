"""SIGTERM on a PostgreSQL node whose database stops answering after the
last call (issue 36, "nothing waits forever"): every call has been answered
and committed, then the cluster's processes are stopped (SIGSTOP), as a
database host that freezes or a network that drops every packet leaves
them. The server must still end within --shutdown_grace plus the
watchdog's second (docs/server.md, --shutdown_grace): a line naming the
store without its password and saying that closing it did not finish,
that every call had ended, and status 5. Once the database answers again,
a new server hands out numbers above every number the stopped one handed
out (nothing it committed was lost, no number comes twice).

It is checked with a client still connected (the server drops its
connection once no call is left, service/rpc/idle_connection_closer.h, then
closes the store) and with none.

Usage: postgresql_frozen_shutdown_test.py HILO_SERVER
Needs Debian's PostgreSQL 15 (testing/temp_postgres.sh); the cluster's
processes are continued and the cluster destroyed whatever happens."""
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "abuse"))
import abuse_lib as lib  # noqa: E402

EXIT_SHUTDOWN_OVERRAN = 5
# The watchdog's bound (--shutdown_grace + 1 s, no --drain_delay) and half
# a second for a loaded machine.
SIGTERM_BOUND_S = lib.GRACE_S + 1.5


def cluster_pids(pg):
    """The cluster's postmaster and its children (backends, checkpointer,
    ...), by the postmaster.pid of the data directory it was started in."""
    with open(f"{pg.dir}/pg/data/postmaster.pid") as f:
        postmaster = int(f.readline())
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # "pid (comm) state ppid ...": comm may hold spaces.
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == postmaster:
            pids.append(int(entry))
    return pids


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_with_database_frozen(checks, binary, pg, uri, connected):
    """One server: a range of "a", the database frozen, SIGTERM; expects the
    watchdog's exit. Returns the highest number handed out."""
    name = "connected" if connected else "idle"
    started = time.monotonic()
    server = lib.Server(binary, f"--store={uri}")
    checks.figure(f"{name}_start_s", round(time.monotonic() - started, 2))
    frozen = []
    try:
        ch = server.endpoint.channel()
        _, high = lib.next_range(ch, "a", timeout=5)
        if not connected:
            ch.close()
        frozen = cluster_pids(pg)
        signal_all(frozen, signal.SIGSTOP)
        rc, took = server.terminate()
        server._drain.join(timeout=2)
        checks.figure(f"{name}_exit", {"status": rc, "s": round(took, 2)})
        checks.expect(rc == EXIT_SHUTDOWN_OVERRAN and took <= SIGTERM_BOUND_S,
                      f"{name}: SIGTERM with the database frozen: exit {rc} "
                      f"after {took:.1f} s; expected "
                      f"{EXIT_SHUTDOWN_OVERRAN} within {SIGTERM_BOUND_S} s")
        said = [s for s in server.stderr_lines
                if "shutdown did not finish" in s]
        checks.figure(f"{name}_line", said[0].strip() if said else None)
        store = "PostgreSQL postgresql://postgres@127.0.0.1:"
        for part in (store, "closing the store", "has not finished",
                     "every call had ended",
                     f"exiting with status {EXIT_SHUTDOWN_OVERRAN}"):
            checks.expect(bool(said) and part in said[0],
                          f"{name}: the watchdog's line does not say "
                          f"{part!r}: {said}")
        if connected:
            ch.close()
        return high
    finally:
        signal_all(frozen, signal.SIGCONT)
        server.close()


def main(binary):
    checks = lib.Checks("postgresql_frozen_shutdown")
    pg = lib.TempPostgres()
    uri = pg.__enter__()
    try:
        highest = 0
        for connected in (True, False):
            highest = stop_with_database_frozen(checks, binary, pg, uri,
                                                connected)
        # The database answers again: the stopped servers' numbers stand.
        # (A start after a server that exited 5 waits up to one node tag
        # lease, 10 s, for the tag that server never released.)
        started = time.monotonic()
        server = lib.Server(binary, f"--store={uri}")
        checks.figure("after_thaw_start_s", round(time.monotonic() - started, 2))
        try:
            ch = server.endpoint.channel()
            low, _ = lib.next_range(ch, "a", timeout=10)
            ch.close()
            checks.figure("after_thaw_low", low)
            checks.expect(low > highest,
                          f"after the database answered again the next "
                          f"range of \"a\" starts at {low}, not above "
                          f"{highest}")
            rc, _ = server.terminate()
            checks.expect(rc == 0, f"SIGTERM with the database answering: "
                          f"exit {rc}")
        finally:
            server.close()
    finally:
        pg.__exit__()
    checks.finish()


if __name__ == "__main__":
    main(sys.argv[1])
