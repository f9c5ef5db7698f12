"""SIGTERM on a SQLite node whose disk stops writing (issue 36, "nothing
waits forever"): a NextRange whose commit the frozen file system holds keeps
a call in the store, and the server still ends its shutdown within
--shutdown_grace plus the watchdog's second: it says which store did not
finish and why, exits with status 5, and the stuck call gets no range.
Likewise when every call was answered but the frozen disk holds the
database's close. And when every call did finish on a disk that writes,
SIGTERM closes the database cleanly (no -wal file left) and exits 0, also
with a client still connected (the server drops its connection once no
call is left: service/rpc/idle_connection_closer.h).

Usage: frozen_disk_shutdown_test.py HILO_SERVER
Runs itself again in a private mount namespace (unshare) with a 16 MiB ext4
image on a loop device for the database, frozen with fsfreeze; the file
system is thawed and unmounted whatever happens; if this process is killed
(a ctest timeout), a guard of its own session thaws it
(private_mount.ThawGuard), which a first scenario checks. Exits 77 (skipped) where
this user may not mount one or freeze it.

A thread blocked on a frozen file system sleeps uninterruptibly, and the
kernel reaps the process only once that thread wakes: the test checks that
the server's own threads have ended within the bound (what the server
controls), and its exit status once the disk is thawed."""
import os
import subprocess
import sys
import threading
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "abuse"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))
import abuse_lib as lib  # noqa: E402
import private_mount  # noqa: E402

INSIDE = "HILO_FROZEN_DISK_TEST_MOUNT"
# The watchdog's bound (--shutdown_grace + 1 s, no --drain_delay) and half
# a second for a loaded machine.
SIGTERM_BOUND_S = lib.GRACE_S + 1.5
EXIT_SHUTDOWN_OVERRAN = 5


def task_states(pid):
    """The state letter of each thread of `pid` still listed, by tid."""
    states = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return states
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states[tid] = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return states


def wait_for(predicate, seconds):
    """Polls `predicate` until it is true or `seconds` have passed; whether
    it became true, and when (seconds from the call)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > seconds:
            return False, time.monotonic() - start
        time.sleep(0.02)
    return True, time.monotonic() - start


def ended_but_blocked(pid):
    """True once only threads asleep in the kernel (D) are left of `pid`,
    or none: the server's own code runs no more."""
    states = task_states(pid)
    return all(state in "DZX" for state in states.values())


def overrun(checks, server, mount, says):
    """SIGTERM to `server` with `mount` frozen: within the bound, a line
    that says `says` and status 5, and no thread of the server's own left
    running; then `mount` thawed and the exit status checked."""
    start = time.monotonic()
    server.process.send_signal(lib.signal.SIGTERM)
    line = "shutdown did not finish"
    said, said_after = wait_for(
        lambda: any(line in s for s in server.stderr_lines), SIGTERM_BOUND_S)
    ended, _ = wait_for(lambda: ended_but_blocked(server.pid),
                        max(0.0, SIGTERM_BOUND_S - (time.monotonic() - start)))
    took = time.monotonic() - start
    checks.figure("watchdog_line_after_s", round(said_after, 2))
    checks.expect(said, f"no '{line}' line within {SIGTERM_BOUND_S} s of "
                  f"SIGTERM")
    checks.expect(ended, f"server threads still running {took:.1f} s after "
                  f"SIGTERM: {task_states(server.pid)}")
    said_lines = [s for s in server.stderr_lines if line in s]
    if said_lines:
        checks.figure("watchdog_line", said_lines[0].strip())
        for part in (says, f"exiting with status {EXIT_SHUTDOWN_OVERRAN}"):
            checks.expect(part in said_lines[0],
                          f"the line does not say {part!r}: "
                          f"{said_lines[0]!r}")
    subprocess.run(["fsfreeze", "-u", mount], check=True)
    try:
        rc = server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    checks.figure("exit_status", rc)
    checks.expect(rc == EXIT_SHUTDOWN_OVERRAN,
                  f"exit status {rc}, expected {EXIT_SHUTDOWN_OVERRAN}")


def frozen_commit(checks, binary, mount):
    db = f"{mount}/frozen.db"
    server = lib.Server(binary, f"--db={db}", "--sync=full")
    frozen = False
    stuck = {}
    try:
        ch = server.endpoint.channel()
        lib.next_range(ch, "orders", timeout=5)
        subprocess.run(["fsfreeze", "-f", mount], check=True)
        frozen = True

        def call():
            try:
                stuck["range"] = lib.next_range(server.endpoint.channel(),
                                                "orders", timeout=30)
            except grpc.RpcError as error:
                stuck["error"] = error.code().name

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        # The commit is held: a server thread sleeps on the frozen disk.
        held, _ = wait_for(
            lambda: "D" in task_states(server.pid).values(), 10)
        checks.expect(held, "no server thread blocked on the frozen file "
                      "system within 10 s of the NextRange")
        if not held:
            return
        overrun(checks, server, mount, ("1 call still waits for the store "
                                        f"(SQLite database {db}), a commit "
                                        "that has not returned"))
        frozen = False
        caller.join(timeout=30)
        checks.figure("stuck_call", stuck)
        checks.expect("range" not in stuck and "error" in stuck,
                      f"the call whose commit was held got {stuck}")
        ch.close()
    finally:
        if frozen:
            subprocess.run(["fsfreeze", "-u", mount])
        server.close()


def frozen_close(checks, binary, mount):
    """Every call answered, then the disk frozen: closing the database
    (its checkpoint writes) cannot finish, and the line says so."""
    db = f"{mount}/closing.db"
    server = lib.Server(binary, f"--db={db}", "--sync=full")
    frozen = False
    try:
        ch = server.endpoint.channel()
        lib.next_range(ch, "orders", timeout=5)
        ch.close()
        subprocess.run(["fsfreeze", "-f", mount], check=True)
        frozen = True
        overrun(checks, server, mount, f"closing the store (SQLite database "
                f"{db}) has not finished")
        frozen = False
    finally:
        if frozen:
            subprocess.run(["fsfreeze", "-u", mount])
        server.close()


def clean_close(checks, binary, mount):
    """Every call finished, a client still connected (the server drops its
    connection once no call is left): the database is closed, its -wal
    file gone, and the exit status 0."""
    db = f"{mount}/clean.db"
    server = lib.Server(binary, f"--db={db}", "--sync=full")
    try:
        ch = server.endpoint.channel()
        lib.next_range(ch, "orders", timeout=5)
        checks.expect(os.path.exists(db + "-wal"), "no -wal file while "
                      "the server runs")
        rc, took = server.terminate()
        checks.figure("clean_exit", f"status {rc} after {took:.1f} s")
        checks.expect(rc == 0 and took <= SIGTERM_BOUND_S,
                      f"SIGTERM with a client connected: status {rc} after "
                      f"{took:.1f} s")
        server._drain.join(timeout=10)
        stopped = [s for s in server.stderr_lines if "stopped" in s]
        checks.figure("stopped_line", stopped[-1].strip() if stopped else
                      server.stderr_lines[-3:])
        checks.expect(not os.path.exists(db + "-wal"),
                      f"the database was left with its -wal file: "
                      f"{stopped}")
        ch.close()
    finally:
        server.close()


def is_frozen(mount):
    """Whether `mount` is frozen now: freezing it again is refused (EBUSY)
    if so; if not, it is thawed again at once."""
    if subprocess.run(["fsfreeze", "-f", mount],
                      capture_output=True).returncode != 0:
        return True
    subprocess.run(["fsfreeze", "-u", mount], check=True)
    return False


def orphaned_guard_thaws(checks, mount):
    """The guard of a test that dies with the disk frozen (a ctest timeout's
    SIGKILL: the guard's pipe ends without "done") thaws it, so that the
    server stuck on it can end and the namespace go."""
    guard = private_mount.ThawGuard(mount)
    subprocess.run(["fsfreeze", "-f", mount], check=True)
    try:
        guard.close(done=False)
        thawed, after = wait_for(lambda: not is_frozen(mount), 10)
        checks.figure("orphaned_guard_thawed_after_s", round(after, 2))
        checks.expect(thawed, "the guard of a dead test left the disk frozen "
                      "for 10 s")
    finally:
        subprocess.run(["fsfreeze", "-u", mount], capture_output=True)


def run(binary, mount):
    checks = lib.Checks("frozen_disk_shutdown")
    image = f"{mount}.img"
    subprocess.run(["truncate", "-s", "16M", image], check=True)
    subprocess.run(["mkfs.ext4", "-q", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mount], check=True)
    try:
        orphaned_guard_thaws(checks, mount)
        # Killed from here on, this process leaves no disk frozen.
        with private_mount.ThawGuard(mount):
            frozen_commit(checks, binary, mount)
            frozen_close(checks, binary, mount)
            clean_close(checks, binary, mount)
    finally:
        subprocess.run(["fsfreeze", "-u", mount], capture_output=True)
        subprocess.run(["umount", mount])
        os.unlink(image)
    checks.finish()


def can_freeze(d):
    """`d`/mnt as the mount point, if this user may mount an ext4 image on
    a loop device there and freeze it, in a private mount namespace; else
    why not."""
    mount = f"{d}/mnt"
    os.mkdir(mount)
    script = ('set -e; truncate -s 16M "$1.img"; mkfs.ext4 -q "$1.img"; '
              'mount -o loop "$1.img" "$1"; '
              'fsfreeze -f "$1" && fsfreeze -u "$1"; umount "$1"')
    probe = subprocess.run(
        private_mount.UNSHARE + ["sh", "-c", script, "sh", mount],
        capture_output=True, text=True)
    if os.path.exists(mount + ".img"):
        os.unlink(mount + ".img")
    if probe.returncode != 0:
        return None, (f"may not mount and freeze an ext4 image on a loop "
                      f"device: {probe.stderr.strip()}")
    return mount, None


def mount_and_run(argv, mount):
    run(argv[1], mount)
    return 0


if __name__ == "__main__":
    sys.exit(private_mount.main("frozen_disk_shutdown", INSIDE, can_freeze,
                                mount_and_run, sys.argv))
