"""A fleet of hilo servers on a replicated PostgreSQL that fails over, with
clients of two languages drawing IDs throughout; no number may be handed
out twice.

  failover_test.py HILO_SERVER HILO_DRAW MODE [ROUNDS]

MODE async: a primary and an asynchronous streaming standby
  (pg_basebackup -R). Each round pauses the standby's walreceiver while the
  fleet commits, kills the primary and all its processes with SIGKILL,
  promotes the standby and lets the walreceiver go only once the promotion
  has told it to stop, so the WAL in flight is really lost (see
  docs/reliability.md); then the old primary is rebuilt as the new
  standby. ROUNDS rounds (default 10).
MODE sync: the same with synchronous_standby_names = '*'.
MODE switchover: clean switchovers (the primary stopped with pg_ctl -m fast,
  the standby promoted).

Two hilo_server processes (tags A and B) share the database through a
libpq multi-host URI with target_session_attrs=read-write, so they follow
the primary by themselves. In every round the C++ client (HILO_DRAW, i.e.
examples/cpp/draw.cc) and the Python client (examples/python/draw.py) draw
document IDs from both servers, paced, before, across and after the event.

Checks: no number is handed out twice in a collection (whatever the tag,
since the servers share one row per collection); every client exits 0;
each server hands out a range again within SERVE_BOUND_S of the promotion;
after each promotion of an asynchronous standby the servers say that the
history went back. Prints per round the WAL lost, the longest wait of each
client, how long the servers took to serve again and the numbers they
skipped. Exits 1 with one line per broken promise."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "abuse"))
import abuse_lib as lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TEMP_PG = os.path.join(ROOT, "testing", "temp_postgres.sh")
PG_BIN = os.environ.get("HILO_PG_BIN", "/usr/lib/postgresql/15/bin")
# A server reconnects at its next batch or probe (every second) and checks
# the history before it writes; a loaded 2-core machine needs some margin.
SERVE_BOUND_S = 20
# How long the walreceiver stays paused while the fleet commits.
LAG_S = 1.0
COLLECTIONS = ("orders", "invoices")


def as_postgres(command):
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def psql(uri, sql, timeout=30):
    done = subprocess.run(["psql", "-qXAt", "-v", "ON_ERROR_STOP=1", uri,
                           "-c", sql], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
    return done.stdout.strip()


class Node:
    """One PostgreSQL data directory on a port of its own, which it keeps
    when it is rebuilt, so the fleet's multi-host URI stays right."""

    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        self.port = None

    def uri(self):
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self, options=""):
        env = dict(os.environ, HILO_PG_OPTIONS=options)
        done = subprocess.run([TEMP_PG, "start", self.dir], env=env,
                              capture_output=True, text=True, timeout=90)
        if done.returncode != 0:
            raise RuntimeError(f"starting {self.dir}: {done.stderr}")
        with open(os.path.join(self.dir, "port")) as f:
            self.port = int(f.read())

    def pids(self):
        """The postmaster and every process it started."""
        try:
            with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
                postmaster = int(f.readline())
        except (OSError, ValueError):
            return []
        children = subprocess.run(["pgrep", "-P", str(postmaster)],
                                  capture_output=True, text=True).stdout
        return [postmaster] + [int(p) for p in children.split()]

    def kill9(self):
        """As if its machine died: every process at once."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{p}") for p in self.pids()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.dir} outlived SIGKILL")
            time.sleep(0.05)

    def wipe(self):
        """Stops it (if it runs) and removes its data, keeping its port."""
        subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D",
                                    f"{self.dir}/data", "-m", "immediate",
                                    "-w", "stop"]), capture_output=True)
        shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)

    def clone_from(self, primary, options):
        """A streaming standby of `primary` (pg_basebackup -R)."""
        os.makedirs(self.dir, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            os.chmod(os.path.dirname(self.dir), 0o755)
        if self.port is not None:
            with open(os.path.join(self.dir, "port"), "w") as f:
                f.write(f"{self.port}\n")
        done = subprocess.run(as_postgres(
            [f"{PG_BIN}/pg_basebackup", "-h", "127.0.0.1", "-p",
             str(primary.port), "-U", "postgres", "-D", f"{self.dir}/data",
             "-R", "-X", "stream", "-c", "fast"]),
            capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup: {done.stderr}")
        self.start(options)

    def walreceiver(self):
        pid = psql(self.uri(), "SELECT pid FROM pg_stat_wal_receiver")
        return int(pid) if pid else None


def signal_pending(pid):
    """Whether `pid` has a signal pending (it is stopped, so it cannot take
    it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("SigPnd:", "ShdPnd:")):
                    if int(line.split()[1], 16) != 0:
                        return True
    except FileNotFoundError:
        return True
    return False


class Draw:
    """One client process drawing paced IDs from the fleet."""

    def __init__(self, lang, targets, collection, seconds, mark_after=None):
        self.lang = lang
        self.collection = collection
        flags = [f"--targets={targets}", f"--collection={collection}",
                 "--threads=2", f"--seconds={seconds}", "--stats"]
        if mark_after is not None:
            flags.append(f"--mark_after={mark_after}")
        if lang == "cpp":
            command = [os.environ["HILO_DRAW"], *flags, "--rate=1500"]
            env = dict(os.environ)
        else:
            gen = os.environ["HILO_GEN_PYTHON"]
            command = ["/usr/bin/python3",
                       os.path.join(ROOT, "examples", "python", "draw.py"),
                       *flags, "--rate=300"]
            client = os.path.join(ROOT, "clients", "python")
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                       PYTHONPATH=f"{gen}:{client}")
        self.out = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdout=self.out,
                                        stderr=subprocess.PIPE, env=env)

    @staticmethod
    def waits(err):
        """What a draw's --stats line says of its waits: (calls that waited
        for a range, the longest wait in ms, the runway in s), or None where
        the line is missing. With a mark, after the mark, and the runway at
        the mark; else over the whole draw less its first call (every new
        client waits for its first range), and the runway at its end."""
        match = re.search(r"longest_wait_ms=([0-9.]+) calls_waited=(\d+) "
                          r"runway_s=(-?[0-9.]+)(?: mark_calls_waited=(\d+) "
                          r"mark_runway_s=(-?[0-9.]+) "
                          r"after_mark_longest_wait_ms=([0-9.]+))?", err)
        if not match:
            return None
        calls = int(match.group(2))
        if match.group(4) is None:
            return max(0, calls - 1), float(match.group(1)), float(
                match.group(3))
        return (calls - int(match.group(4)), float(match.group(6)),
                float(match.group(5)))

    def finish(self, timeout):
        """(exit status, the IDs, stderr)."""
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        self.out.seek(0)
        ids = self.out.read().decode().split()
        self.out.close()
        return self.process.returncode, ids, err.decode(errors="replace")


def wait_caught_up(primary, bound=60):
    """Waits until a standby streams from `primary` and has flushed all the
    WAL the primary had flushed by then. While no standby streams (the old
    primary being rebuilt), the primary lists none, and the servers hand
    out ranges on the primary alone: a standby promoted before it has
    received them would lose them, which docs/reliability.md ("What it
    cannot see") leaves to the operator (Patroni's maximum_lag_on_failover).
    The rounds fail over only a standby that has caught up, as such a setup
    would."""
    deadline = time.monotonic() + bound
    target = None
    while time.monotonic() < deadline:
        if target is None:
            if psql(primary.uri(), "SELECT count(*) FROM pg_stat_replication "
                    "WHERE state = 'streaming'") != "0":
                target = psql(primary.uri(),
                              "SELECT pg_current_wal_flush_lsn()")
        elif psql(primary.uri(), "SELECT count(*) FROM pg_stat_replication "
                  "WHERE state = 'streaming' AND "
                  f"flush_lsn >= '{target}'::pg_lsn") != "0":
            return
        time.sleep(0.05)
    raise RuntimeError(f"no standby caught up with the primary within "
                       f"{bound} s")


def first_range_after(server, since, bound):
    """Seconds from `since` until `server` handed out a range."""
    while time.monotonic() - since < bound:
        try:
            lib.next_range(server.endpoint.channel(), "probe", timeout=2)
            return time.monotonic() - since
        except Exception:  # noqa: BLE001 - not serving yet
            time.sleep(0.05)
    return None


def main():
    server_binary, draw_binary, mode = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else (
        10 if mode == "async" else 3)
    os.environ["HILO_DRAW"] = draw_binary
    failures = []

    def expect(ok, message):
        if not ok:
            failures.append(message)
            print(f"failover_test: FAIL {message}", file=sys.stderr)

    root = tempfile.mkdtemp(prefix="hilo-failover-")
    os.chmod(root, 0o755)
    options = ("-c wal_level=replica -c max_wal_senders=10 "
               "-c wal_sender_timeout=10s -c max_connections=100")
    nodes = [Node(root, "n0"), Node(root, "n1")]
    servers = []
    try:
        nodes[0].start(options)
        if mode == "sync":
            psql(nodes[0].uri(),
                 "ALTER SYSTEM SET synchronous_standby_names = '*'")
            psql(nodes[0].uri(), "SELECT pg_reload_conf()")
        nodes[1].clone_from(nodes[0], options)
        primary, standby = nodes
        uri = (f"postgresql://postgres@127.0.0.1:{nodes[0].port},"
               f"127.0.0.1:{nodes[1].port}/postgres"
               "?target_session_attrs=read-write&connect_timeout=2")
        for tag in ("A", "B"):
            servers.append(lib.Server(server_binary, f"--store={uri}",
                                      f"--node_tag={tag}",
                                      "--max_range_size=256"))
        targets = ",".join(f"127.0.0.1:{s.port}" for s in servers)
        seen = {}  # (collection, number) -> first ID with it
        twice = 0
        history_lines = 0
        for n in range(1, rounds + 1):
            draws = [Draw(lang, targets, c, seconds=7)
                     for lang in ("cpp", "python") for c in COLLECTIONS]
            time.sleep(2)
            lost = 0
            receiver = standby.walreceiver()
            if mode == "switchover":
                subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D",
                                            f"{primary.dir}/data", "-m",
                                            "fast", "-w", "stop"]),
                               check=True, capture_output=True, timeout=60)
                subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D",
                                            f"{standby.dir}/data", "-w",
                                            "promote"]),
                               check=True, capture_output=True, timeout=60)
            else:
                if receiver is None:
                    raise RuntimeError("the standby has no walreceiver")
                os.kill(receiver, signal.SIGSTOP)
                received = psql(standby.uri(),
                                "SELECT pg_last_wal_receive_lsn()")
                time.sleep(LAG_S)
                flushed = psql(primary.uri(),
                               "SELECT pg_current_wal_flush_lsn()")
                primary.kill9()
                lost = int(psql(standby.uri(), f"SELECT '{flushed}'::pg_lsn - "
                                f"'{received}'::pg_lsn"))
                subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D",
                                            f"{standby.dir}/data", "-W",
                                            "promote"]),
                               check=True, capture_output=True, timeout=60)
                deadline = time.monotonic() + 20
                while (not signal_pending(receiver)
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                os.kill(receiver, signal.SIGCONT)
            promoted = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if psql(standby.uri(), "SELECT pg_is_in_recovery()") == "f":
                    promoted = time.monotonic()
                    break
                time.sleep(0.05)
            if promoted is None:
                raise RuntimeError("the standby was not promoted in 60 s")
            # Each server's first range after the promotion, timed while the
            # old primary comes back as the new standby: with
            # synchronous_standby_names set, the new primary commits nothing
            # before a standby streams from it.
            serve = [None] * len(servers)

            def time_serving(i):
                serve[i] = first_range_after(servers[i], promoted,
                                             SERVE_BOUND_S)
            timers = [threading.Thread(target=time_serving, args=(i,))
                      for i in range(len(servers))]
            for t in timers:
                t.start()
            primary.wipe()
            primary.clone_from(standby, options)
            primary, standby = standby, primary
            wait_caught_up(primary)
            for t in timers:
                t.join()
            for s, took in zip(servers, serve):
                expect(took is not None,
                       f"round {n}: server on port {s.port} handed out no "
                       f"range within {SERVE_BOUND_S} s of the promotion")
            waits = []
            for d in draws:
                rc, ids, err = d.finish(timeout=60)
                expect(rc == 0, f"round {n}: {d.lang} draw from "
                       f"{d.collection} exited {rc}: {err.strip()}")
                waited = Draw.waits(err)
                expect(waited is not None, f"round {n}: {d.lang} draw from "
                       f"{d.collection} reported no waits: {err.strip()}")
                waits.append(f"{d.lang}/{d.collection} "
                             + (f"{waited[1]} ms ({waited[0]} calls waited)"
                                if waited else "?"))
                for doc in ids:
                    m = re.fullmatch(r"([a-z]+)/(\d+)-([A-Z0-9]+)", doc)
                    if not m:
                        expect(False, f"round {n}: not an ID: {doc!r}")
                        continue
                    key = (m.group(1), int(m.group(2)))
                    if key in seen:
                        twice += 1
                        if twice <= 5:
                            expect(False, f"round {n}: {doc} repeats number "
                                   f"{key[1]} of {seen[key]}")
                    else:
                        seen[key] = doc
            moved = [line for s in servers for line in s.stderr_lines
                     if "moved" in line and "reservations" in line]
            new_lines = moved[history_lines:]
            history_lines = len(moved)
            skipped = sum(int(m.group(1)) for m in (
                re.search(r"skipping (\d+) number", line)
                for line in new_lines) if m)
            if mode != "switchover":
                expect(len(new_lines) >= 1,
                       f"round {n}: no server said the history went back")
            print(f"failover_test: {mode} round {n}: WAL lost {lost} bytes; "
                  f"served again after "
                  f"{', '.join(f'{t:.2f} s' if t else 'never' for t in serve)}"
                  f"; longest waits {'; '.join(waits)}; "
                  f"{skipped} numbers skipped", flush=True)
        print(f"failover_test: {mode}: {rounds} rounds, {len(seen)} numbers "
              f"drawn, {twice} twice")
        expect(twice == 0, f"{twice} numbers were handed out twice")
    finally:
        for s in servers:
            s.close()
        for node in nodes:
            subprocess.run([TEMP_PG, "destroy", node.dir],
                           capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print(f"failover_test: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"failover_test: {mode}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
