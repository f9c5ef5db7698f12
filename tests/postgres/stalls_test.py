"""hilo_server processes on a PostgreSQL database that stalls: what the
README promises whatever the database does.

  stalls_test.py HILO_SERVER standby
    A synchronous standby that never connects (synchronous_standby_names =
    'ghost'): every COMMIT waits for it forever. NextRange must fail
    UNAVAILABLE within a bound, health turn NOT_SERVING within seconds,
    SIGTERM end the server within its --shutdown_grace; once the setting is
    gone the server serves again, and no number was handed out twice.

  stalls_test.py HILO_SERVER frozen
    Two servers on one database; A is SIGSTOPped inside its transaction
    (its session "idle in transaction", holding the row of the collection
    it was writing). B must serve other collections without waiting at all
    while it asks for A's collection too, serve A's collection again within
    seconds, and stay SERVING; A, resumed, serves again; no number twice.

  stalls_test.py HILO_SERVER psql
    The same with the row locked from psql: B fails only the calls on that
    collection, with UNAVAILABLE naming the lock, within seconds; other
    collections do not wait; once psql lets go, the collection is served.

Each scenario starts a PostgreSQL of its own (testing/temp_postgres.sh),
since it changes settings of the whole cluster. Exits 1 with one line per
broken promise."""
import os
import signal
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


def set_standby_names(uri, value):
    """Sets synchronous_standby_names ('' resets it) and returns once the
    postmaster has reloaded it: pg_reload_conf() only signals, and a call
    sent at once could commit under the old setting. The postmaster signals
    every session as it reloads, so a new session seeing the value means the
    server's sessions have been told too."""
    if value:
        psql(uri, f"ALTER SYSTEM SET synchronous_standby_names = '{value}'")
    else:
        psql(uri, "ALTER SYSTEM RESET synchronous_standby_names")
    psql(uri, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["psql", "-qXAt", uri, "-c", "SHOW synchronous_standby_names"],
            capture_output=True, text=True, timeout=30).stdout.strip()
        if shown == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"synchronous_standby_names not {value!r} after "
                         "10 s of pg_reload_conf()")


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

            set_standby_names(uri, "ghost")
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
                # Where the database is and who connects is for the log.
                address = uri.split("//", 1)[1].rsplit("/", 1)[0]
                for secret in ("postgresql://", address, "127.0.0.1",
                               address.split("@")[0] + "@",
                               ":" + address.rsplit(":", 1)[1]):
                    checks.expect(secret not in error[1],
                                  f"a client's error names {secret!r}: "
                                  f"{error[1]}")
                # The server's stderr is read by a thread of lib.Server.
                logged = False
                for _ in range(50):
                    logged = any(f"PostgreSQL at postgresql://{address}" in l
                                 for l in list(server.stderr_lines))
                    if logged:
                        break
                    time.sleep(0.1)
                checks.expect(logged, "the server's log has no line naming "
                              "the database within 5 s")
            took = health_becomes(ch, NOT_SERVING, HEALTH_BOUND_S)
            checks.figure("not_serving_after_s", took and round(took, 1))
            checks.expect(took is not None,
                          f"health not NOT_SERVING within {HEALTH_BOUND_S} s "
                          "while every commit stalls")

            set_standby_names(uri, "")
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
            set_standby_names(uri, "ghost")
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
            set_standby_names(uri, "")
        finally:
            ch.close()
            server.close()
            if checks.failures:
                sys.stderr.writelines("  hilo_server: " + line
                                      for line in server.stderr_lines[-30:])
    return checks


# B must answer a call on another collection within this, while a call on
# the locked one is in flight: less than lock_timeout (2 s), so a call that
# waited behind the locked row's cannot pass.
NO_WAIT_S = 1.0
# A frozen peer's session ends after idle_in_transaction_session_timeout
# (5 s); its collection is then served again.
RECOVERY_BOUND_S = 15


def query(uri, sql):
    return subprocess.run(["psql", "-qXAt", uri, "-c", sql], check=True,
                          capture_output=True, text=True,
                          timeout=30).stdout.strip()


class Caller(threading.Thread):
    """Calls NextRange on `collection` over its own channel until stopped
    (or, with until_ok, until one succeeds); keeps every range and error."""

    def __init__(self, endpoint, collection, timeout, until_ok=False):
        super().__init__(daemon=True)
        self.channel = endpoint.channel()
        self.collection = collection
        self.timeout = timeout
        self.until_ok = until_ok
        self.ranges, self.errors = [], []
        self.stop = threading.Event()
        self.first_ok_at = None
        self.start()

    def run(self):
        while not self.stop.is_set():
            got, error = next_range(self.channel, self.collection, self.timeout)
            if got:
                self.ranges.append(got)
                if self.first_ok_at is None:
                    self.first_ok_at = time.monotonic()
                if self.until_ok:
                    return
            else:
                self.errors.append(error)
                time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.join(timeout=30)
        self.channel.close()


def expect_no_wait(checks, ch, what):
    """NextRange on collections nobody locks answers within NO_WAIT_S."""
    for i in range(5):
        got, error = next_range(ch, f"other-{i % 2}", timeout=NO_WAIT_S)
        checks.expect(got is not None,
                      f"{what}: NextRange on an unlocked collection did not "
                      f"answer within {NO_WAIT_S} s: {error}")


def frozen(server_binary):
    checks = Checks()
    with lib.TempPostgres() as uri:
        a = lib.Server(server_binary, f"--store={uri}?application_name=hilo-a",
                       "--node_tag=A")
        b = lib.Server(server_binary, f"--store={uri}", "--node_tag=B")
        ch_b = b.endpoint.channel()
        callers = []
        try:
            for name in ("shared", "other-0", "other-1"):
                got, error = next_range(ch_b, name, timeout=10)
                if not checks.expect(got, f"first NextRange {name}: {error}"):
                    return checks
            load = Caller(a.endpoint, "shared", timeout=2)
            callers.append(load)
            time.sleep(0.5)
            frozen_in_transaction = False
            for _ in range(200):
                os.kill(a.pid, signal.SIGSTOP)
                time.sleep(0.05)
                idle = query(uri, "SELECT count(*) FROM pg_stat_activity "
                                  "WHERE application_name = 'hilo-a' AND "
                                  "state = 'idle in transaction'")
                if idle != "0":
                    frozen_in_transaction = True
                    break
                os.kill(a.pid, signal.SIGCONT)
                time.sleep(0.02)
            if not checks.expect(frozen_in_transaction,
                                 "could not stop A inside its transaction"):
                return checks
            frozen_at = time.monotonic()
            shared_b = Caller(b.endpoint, "shared", timeout=3, until_ok=True)
            callers.append(shared_b)
            time.sleep(0.3)  # B's call on the held row is in flight
            expect_no_wait(checks, ch_b, "A frozen in its transaction")
            checks.expect(health(ch_b) == SERVING,
                          "B not SERVING while it serves, A frozen")
            shared_b.join(timeout=RECOVERY_BOUND_S + 5)
            took = (shared_b.first_ok_at - frozen_at
                    if shared_b.first_ok_at else None)
            checks.figure("b_serves_shared_after_s", took and round(took, 1))
            checks.expect(took is not None and took <= RECOVERY_BOUND_S,
                          "B did not serve the frozen server's collection "
                          f"within {RECOVERY_BOUND_S} s (took {took})")
            codes = {e[0] for e in shared_b.errors}
            checks.figure("b_shared_errors", len(shared_b.errors))
            checks.expect(codes <= {grpc.StatusCode.UNAVAILABLE},
                          f"B's calls on the held row failed with {codes}, "
                          "not only UNAVAILABLE")
            os.kill(a.pid, signal.SIGCONT)
            ch_a = a.endpoint.channel()
            took = health_becomes(ch_a, SERVING, HEALTH_BOUND_S)
            got, error = next_range(ch_a, "shared", timeout=10)
            ch_a.close()
            checks.expect(took is not None and got is not None,
                          f"A resumed: health SERVING after {took} s, "
                          f"NextRange {got or error}")
            for c in callers:
                c.finish()
            expect_disjoint(checks, load.ranges + shared_b.ranges +
                            ([got] if got else []), "shared")
            checks.figure("a_ranges_during_load", len(load.ranges))
        finally:
            for c in callers:
                c.finish()
            ch_b.close()
            for server, name in ((a, "A"), (b, "B")):
                if server.alive():
                    os.kill(server.pid, signal.SIGCONT)
                server.close()
                if checks.failures:
                    sys.stderr.writelines(f"  hilo_server {name}: " + line
                                          for line in server.stderr_lines[-20:])
    return checks


def held_by_psql(server_binary):
    checks = Checks()
    with lib.TempPostgres() as uri:
        b = lib.Server(server_binary, f"--store={uri}", "--node_tag=B")
        ch_b = b.endpoint.channel()
        holder = None
        try:
            ranges = []
            for name in ("held", "other-0", "other-1"):
                got, error = next_range(ch_b, name, timeout=10)
                if not checks.expect(got, f"first NextRange {name}: {error}"):
                    return checks
                if name == "held":
                    ranges.append(got)
            holder = subprocess.Popen(
                ["psql", "-qXAt", uri], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True)
            holder.stdin.write("BEGIN;\nSELECT max FROM hilo_collections "
                               "WHERE name = 'held' FOR UPDATE;\n"
                               "\\echo locked\n")
            holder.stdin.flush()
            while holder.stdout.readline().strip() != "locked":
                pass
            held = Caller(b.endpoint, "held", timeout=10)
            time.sleep(0.3)  # B's call on the held row is in flight
            expect_no_wait(checks, ch_b, "a row locked from psql")
            checks.expect(health(ch_b) == SERVING,
                          "B not SERVING while it serves, a row held by psql")
            time.sleep(3)
            held.finish()
            checks.expect(
                not held.ranges and held.errors and
                all(e[0] == grpc.StatusCode.UNAVAILABLE and "locked" in e[1]
                    and e[2] <= 5 for e in held.errors),
                "calls on the row psql holds: expected UNAVAILABLE naming the "
                f"lock within 5 s each, got {held.ranges} {held.errors[:3]}")
            checks.figure("held_call", held.errors[:1])
            holder.stdin.write("ROLLBACK;\n\\q\n")
            holder.stdin.flush()
            holder.wait(timeout=10)
            got, error = next_range(ch_b, "held", timeout=10)
            if checks.expect(got, f"NextRange once psql let go: {error}"):
                ranges.append(got)
            expect_disjoint(checks, ranges, "held")
        finally:
            if holder and holder.poll() is None:
                holder.kill()
                holder.wait()
            ch_b.close()
            b.close()
            if checks.failures:
                sys.stderr.writelines("  hilo_server: " + line
                                      for line in b.stderr_lines[-20:])
    return checks


def main(argv):
    binary, scenario = argv[1], argv[2]
    checks = {"standby": standby, "frozen": frozen,
              "psql": held_by_psql}[scenario](binary)
    for name, value in checks.figures.items():
        print(f"stalls_test: {scenario}: {name} = {value}")
    if checks.failures:
        return 1
    print(f"stalls_test: {scenario}: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
