"""hilo_server processes on a PostgreSQL database that stalls: what the
README promises whatever the database does.

  stalls_test.py HILO_SERVER standby
    A synchronous standby that never connects (synchronous_standby_names =
    'ghost'): every COMMIT waits for it forever. NextRange must fail
    UNAVAILABLE within a bound, health turn NOT_SERVING within seconds,
    SIGTERM end the server within its --shutdown_grace; once the setting is
    gone the server serves again, and no number was handed out twice.

Each scenario starts a PostgreSQL of its own (tests/postgres/temp_postgres.sh),
since it changes settings of the whole cluster. Exits 1 with one line per
broken promise."""
import os
import subprocess
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "abuse"))
import abuse_lib as lib  # noqa: E402

HEALTH = "/grpc.health.v1.Health/Check"
SERVING, NOT_SERVING = 1, 2
# The store waits statement_timeout (5 s) and a second for COMMIT, then 2 s
# for the answer to its cancel request: a stalled call ends within 8 s. The
# bounds below leave room for a loaded machine; a server that waits for the
# database without a bound misses them by far (it never answers).
CALL_BOUND_S = 15
HEALTH_BOUND_S = 15
# SIGTERM: the server's --shutdown_grace (lib.GRACE_S) and a margin for
# the process to exit.
SIGTERM_BOUND_S = lib.GRACE_S + 1.5


class Checks:
    def __init__(self):
        self.failures = []
        self.figures = {}

    def figure(self, name, value):
        self.figures[name] = value

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)
            print(f"stalls_test: FAIL {message}", file=sys.stderr)
        return ok


def psql(uri, sql):
    subprocess.run(["psql", "-qXAt", "-v", "ON_ERROR_STOP=1", uri, "-c", sql],
                   check=True, capture_output=True, text=True, timeout=30)


def health(ch, timeout=2):
    """The health service's status, or None if the call failed."""
    call = ch.unary_unary(HEALTH, request_serializer=None,
                          response_deserializer=None)
    try:
        return lib.parse_varints(call(b"", timeout=timeout)).get(1, 0)
    except grpc.RpcError:
        return None


def health_becomes(ch, want, limit):
    """Seconds until health read `want` (polled), or None after `limit`."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if health(ch) == want:
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def next_range(ch, collection, timeout):
    """((low, high), None) or (None, (status code, details, seconds))."""
    start = time.monotonic()
    try:
        return lib.next_range(ch, collection, timeout=timeout), None
    except grpc.RpcError as e:
        return None, (e.code(), e.details(), time.monotonic() - start)


def expect_disjoint(checks, ranges, what):
    ordered = sorted(ranges)
    for (low_a, high_a), (low_b, high_b) in zip(ordered, ordered[1:]):
        checks.expect(low_b > high_a,
                      f"{what}: ranges {low_a}-{high_a} and {low_b}-{high_b} "
                      "overlap: a number was handed out twice")


def standby(server_binary):
    checks = Checks()
    with lib.TempPostgres() as uri:
        server = lib.Server(server_binary, f"--store={uri}", "--node_tag=S")
        ch = server.endpoint.channel()
        try:
            ranges = []
            got, error = next_range(ch, "orders", timeout=10)
            if not checks.expect(got is not None,
                                 f"first NextRange failed: {error}"):
                return checks
            ranges.append(got)

            psql(uri, "ALTER SYSTEM SET synchronous_standby_names = 'ghost'")
            psql(uri, "SELECT pg_reload_conf()")
            got, error = next_range(ch, "orders", timeout=CALL_BOUND_S + 30)
            checks.expect(
                got is None and error[0] == grpc.StatusCode.UNAVAILABLE and
                error[2] <= CALL_BOUND_S,
                "NextRange while COMMIT waits for a standby that never comes: "
                f"expected UNAVAILABLE within {CALL_BOUND_S} s, got "
                f"{got if got else error}")
            if error:
                checks.figure("stalled_call_s", round(error[2], 1))
                checks.figure("stalled_call_details", error[1])
            took = health_becomes(ch, NOT_SERVING, HEALTH_BOUND_S)
            checks.figure("not_serving_after_s", took and round(took, 1))
            checks.expect(took is not None,
                          f"health not NOT_SERVING within {HEALTH_BOUND_S} s "
                          "while every commit stalls")

            psql(uri, "ALTER SYSTEM RESET synchronous_standby_names")
            psql(uri, "SELECT pg_reload_conf()")
            took = health_becomes(ch, SERVING, HEALTH_BOUND_S)
            checks.expect(took is not None,
                          f"health not SERVING within {HEALTH_BOUND_S} s of "
                          "the standby setting's removal")
            for _ in range(3):
                got, error = next_range(ch, "orders", timeout=10)
                if checks.expect(got is not None,
                                 f"NextRange after the setting's removal: "
                                 f"{error}"):
                    ranges.append(got)
            expect_disjoint(checks, ranges, "orders")

            # SIGTERM while calls wait for commits that never return.
            psql(uri, "ALTER SYSTEM SET synchronous_standby_names = 'ghost'")
            psql(uri, "SELECT pg_reload_conf()")
            stuck = [threading.Thread(target=next_range,
                                      args=(server.endpoint.channel(),
                                            f"stuck-{i}", 60), daemon=True)
                     for i in range(4)]
            for t in stuck:
                t.start()
            time.sleep(0.5)  # the calls reach the store
            rc, took = server.terminate()
            checks.figure("sigterm", f"exit {rc} after {took:.1f} s")
            checks.expect(
                rc is not None and took <= SIGTERM_BOUND_S,
                f"SIGTERM with commits stalled: exit {rc} after {took:.1f} s; "
                f"expected an exit within {SIGTERM_BOUND_S} s")
            psql(uri, "ALTER SYSTEM RESET synchronous_standby_names")
            psql(uri, "SELECT pg_reload_conf()")
        finally:
            ch.close()
            server.close()
            if checks.failures:
                sys.stderr.writelines("  hilo_server: " + line
                                      for line in server.stderr_lines[-30:])
    return checks


def main(argv):
    binary, scenario = argv[1], argv[2]
    checks = {"standby": standby}[scenario](binary)
    for name, value in checks.figures.items():
        print(f"stalls_test: {scenario}: {name} = {value}")
    if checks.failures:
        return 1
    print(f"stalls_test: {scenario}: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
