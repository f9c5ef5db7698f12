"""A node whose SQLite database's file system fills up (issue 36 item 7):
while its writes fail, NextRange is RESOURCE_EXHAUSTED with a message that
names no path, and health says NOT_SERVING; once space is back, health says
SERVING again by itself (no call needed), and allocation goes on.

Usage: disk_full_health_test.py HILO_SERVER
Runs itself again in a private mount namespace (unshare) with a 2 MiB tmpfs
for the database, so nothing stays mounted; exits 77 (skipped) where this
user may not mount one."""
import os
import subprocess
import sys
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "abuse"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))
import abuse_lib as lib  # noqa: E402
import private_mount  # noqa: E402

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
INSIDE = "HILO_DISK_FULL_TEST_MOUNT"


def health(server):
    ch = server.endpoint.channel()
    try:
        call = ch.unary_unary(HEALTH_CHECK, request_serializer=None,
                              response_deserializer=None)
        status = lib.parse_varints(call(b"", timeout=2)).get(1)
        return {1: "SERVING", 2: "NOT_SERVING"}.get(status, str(status))
    except grpc.RpcError as error:
        return error.code().name
    finally:
        ch.close()


def health_becomes(server, wanted, seconds):
    """Polls health until it is `wanted`, for at most `seconds`; the last
    answer."""
    deadline = time.monotonic() + seconds
    answer = health(server)
    while answer != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
        answer = health(server)
    return answer


def run(binary, mount):
    checks = lib.Checks("disk_full_health")
    db = f"{mount}/hilo.db"
    server = lib.Server(binary, f"--db={db}")
    filler = f"{mount}/filler"
    try:
        ch = server.endpoint.channel()
        lib.next_range(ch, "steady", timeout=5)
        checks.expect(health(server) == "SERVING", "not SERVING at start")
        # Everything that is left, taken.
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        refusal = None
        created = 0
        for i in range(500):
            try:
                lib.next_range(ch, f"new-{i:04d}-" + "n" * 200, timeout=5)
                created += 1
            except grpc.RpcError as error:
                refusal = error
                break
        checks.figure("created_before_full", created)
        checks.expect(refusal is not None and refusal.code() ==
                      grpc.StatusCode.RESOURCE_EXHAUSTED,
                      f"no RESOURCE_EXHAUSTED on a full disk: {refusal}")
        if refusal is not None:
            message = refusal.details() or ""
            checks.figure("client_message", message)
            for secret in (mount, "hilo.db", "/"):
                checks.expect(secret not in message,
                              f"the client's message names {secret!r}: "
                              f"{message!r}")
        checks.expect(health(server) == "NOT_SERVING",
                      f"health says {health(server)} while writes fail for "
                      f"a full disk")
        # Space is back: health turns SERVING without a call.
        os.unlink(filler)
        answer = health_becomes(server, "SERVING", 10)
        checks.expect(answer == "SERVING",
                      f"health says {answer} 10 s after space came back")
        low, _ = lib.next_range(ch, "steady", timeout=5)
        checks.expect(low > 32, f"steady's next range starts at {low}")
        lib.next_range(ch, "after-space", timeout=5)
        ch.close()
        rc, took = server.terminate()
        checks.expect(rc == 0, f"SIGTERM: exit {rc}")
        # The detail the client did not get is in the server's log.
        server._drain.join(timeout=10)
        checks.expect(any("database or disk is full" in line and db in line
                          for line in server.stderr_lines),
                      f"no log line names the full database: "
                      f"{server.stderr_lines[-5:]}")
    finally:
        server.close()
    checks.finish()


def mount_and_run(argv, mount):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m",
                    "hilo-disk-full", mount], check=True)
    run(argv[1], mount)
    return 0


def can_mount(d):
    """`d` as the mount point, if this user may mount a tmpfs there in a
    private mount namespace; else why not."""
    probe = subprocess.run(
        private_mount.UNSHARE + ["mount", "-t", "tmpfs", "-o", "size=2m",
                                 "hilo-disk-full", d],
        capture_output=True, text=True)
    if probe.returncode != 0:
        return None, (f"may not mount a tmpfs in a private mount namespace: "
                      f"{probe.stderr.strip()}")
    return d, None


if __name__ == "__main__":
    sys.exit(private_mount.main("disk_full_health", INSIDE, can_mount,
                                mount_and_run, sys.argv))
