"""A fleet of hilo servers on a PostgreSQL cluster run by Patroni, as many
users run it: Debian's `patroni` (3.0) and `etcd-server` (3.4), a
one-member etcd and two Patroni members on this machine with
synchronous_mode on. Clients of two languages draw IDs across a
`patronictl switchover` and two failovers; no number may be handed out
twice.

  patroni_test.py HILO_SERVER HILO_DRAW [SERVER_FLAG...]

SERVER_FLAGs go to both hilo_server processes after the test's own (the
test's default is --max_range_size=256, so that clients ask the servers
for ranges many times a second and really wait across each event; pass
--max_range_size=1048576, the server's default, to measure what the
servers' --range_runway gives, and --range_runway=0 for the size rule
before it). HILO_PATRONI_WARMUP_S (default 3) is how long the clients draw
before each event: a client reaches its steady range size only after about
twice the runway (docs/reliability.md, "A runway that covers a failover").

Set-up: etcd on free loopback ports with its data in a temporary
directory; member m0 bootstraps the cluster and m1 joins it (basebackup);
the test waits until Patroni's REST API shows a leader and a sync standby.
A role `hilo` (LOGIN, pg_monitor) owns a database `hilo`. A server as a
role without pg_monitor must hand out nothing and name the grant (it
cannot see the standbys' positions), refusing to start or answering
UNAVAILABLE. Two hilo_server processes (tags A and B) share the database
through a libpq multi-host URI over both members' ports with
target_session_attrs=read-write.

Events, each while the C++ client (HILO_DRAW, examples/cpp/draw.cc) and
the Python client (examples/python/draw.py) draw document IDs from both
servers, paced, before, across and after it:
  switchover: `patronictl switchover --leader L --candidate S --force`;
    then the old leader comes back as the sync standby.
  failover: the leader's postmaster killed with SIGKILL; Patroni
    (primary_start_timeout 0) fails over to the sync standby, and the old
    leader comes back as the sync standby. Where Patroni judges the
    standby unfit and restarts the primary in place instead (its REST
    call to the standby timed out on a loaded machine), the test says so
    and kills the postmaster again (at most 3 times).
  lost: the leader's machine lost: its Patroni and every PostgreSQL
    process killed with SIGKILL at once; the sync standby takes the
    leader key when it expires (ttl 10 s).

Checks: no number is handed out twice in a collection (whatever the tag:
the servers share one row per collection); every client exits 0; each
server hands out a range within SERVE_BOUND_S of the promotion; for each
event exactly one server says the history changed (a new timeline) and
moved the collections on (up to one per new timeline where Patroni restarted the primary
in place first, which makes a timeline of its own), and
hilo_store_history_rewinds_total over the fleet adds up to the servers'
lines saying so. Prints per
event how long the promotion took, the longest wait of each client, how
long each server took to serve again, and the servers' "moved N
collection(s) on" lines. Every process it started (etcd, Patroni,
PostgreSQL, hilo) is killed and its directory removed, also on failure.
Also prints, per event and in all, how many application calls waited for
a range from a second before the event on (each client's calls_waited)
and the longest wait, and each client's runway at that moment; the test
asserts that every client reported them, never what they are.
Exits 1 with one line per broken promise."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "abuse"))
sys.path.insert(0, HERE)
import abuse_lib as lib  # noqa: E402
from failover_test import (  # noqa: E402
    Draw, as_postgres, first_range_after, psql)

PG_BIN = os.environ.get("HILO_PG_BIN", "/usr/lib/postgresql/15/bin")
# From the moment Patroni's REST API calls the new leader primary: a
# server reconnects at its next batch or probe (every second) and checks
# the history before it writes. Generous: a loaded 2-core machine.
SERVE_BOUND_S = 20
# Bounds on the cluster's own steps (not on hilo).
ETCD_BOUND_S = 30
MEMBER_BOUND_S = 90
PROMOTION_BOUND_S = 60
# Crashes of the leader's postmaster before Patroni must have failed over
# (see crash_until_failover).
CRASH_ATTEMPTS = 3
# The timeline a primary writes on (0 in recovery).
TIMELINE_SQL = ("SELECT CASE WHEN pg_is_in_recovery() THEN 0 ELSE ('x' || "
                "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))"
                "::bit(32)::int END")
# A line of Patroni's own logger ("2026-12-05 01:38:51,817 INFO: ...").
PATRONI_LINE = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+: ")
# The events in order, and how long the draws across each run: the event
# comes EVENT_AFTER_S into them, and a draw measures a wait only if the
# servers serve again before it ends, so the draws across a lost machine
# outlast the leader key's ttl (10 s) and the promotion.
EVENT_AFTER_S = float(os.environ.get("HILO_PATRONI_WARMUP_S", "3"))
EVENTS = (("switchover", EVENT_AFTER_S + 10), ("failover", EVENT_AFTER_S + 10),
          ("lost", EVENT_AFTER_S + 17))
COLLECTIONS = ("orders", "invoices")


def log(text):
    print(f"patroni_test: {text}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=2):
    """(HTTP status, parsed body), or (None, None) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"null")
        except ValueError:
            return error.code, None
    except (OSError, ValueError):
        return None, None


def wait_for(what, bound, check, every=0.2):
    """check()'s first true value within `bound` seconds; raises naming
    `what` otherwise."""
    deadline = time.monotonic() + bound
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {bound} s")
        time.sleep(every)


def start(command, log_path, as_user=False):
    """A child in a process group of its own, its output in `log_path`."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(as_postgres(command) if as_user else command,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                start_new_session=True)


def kill_group(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Member:
    """One Patroni member: its REST API and PostgreSQL on ports of their
    own, its data, configuration and log under `root`/`name`."""

    def __init__(self, root, name, scope, etcd_port):
        self.name = name
        self.dir = os.path.join(root, name)
        self.data = os.path.join(self.dir, "data")
        self.api_port = free_port()
        self.pg_port = free_port()
        self.log = os.path.join(self.dir, "patroni.log")
        self.process = None
        os.makedirs(self.dir)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        os.chmod(self.dir, 0o700)
        # JSON is YAML. Trust on loopback only: a test cluster.
        config = {
            "scope": scope,
            "name": name,
            "restapi": {"listen": f"127.0.0.1:{self.api_port}",
                        "connect_address": f"127.0.0.1:{self.api_port}"},
            "etcd3": {"hosts": [f"127.0.0.1:{etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": 10, "loop_wait": 1, "retry_timeout": 4,
                    # What hilo needs (deploy/README.md): a commit is
                    # acknowledged once the sync standby has it, and only
                    # that standby is promoted.
                    "synchronous_mode": True,
                    "maximum_lag_on_failover": 1048576,
                    # Fail over when the primary crashes rather than
                    # restart it in place (the default waits 300 s).
                    "primary_start_timeout": 0,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "remove_data_directory_on_rewind_failure": True,
                        "parameters": {"max_connections": 100,
                                       "wal_sender_timeout": "10s"},
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": self.data,
                "bin_dir": PG_BIN,
                "pgpass": os.path.join(self.dir, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "replicator"},
                },
                "parameters": {"unix_socket_directories": self.dir},
                "pg_hba": ["local all all trust",
                           "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
            },
        }
        self.config = os.path.join(self.dir, "patroni.yml")
        with open(self.config, "w") as f:
            json.dump(config, f, indent=1)
        if os.geteuid() == 0:
            shutil.chown(self.config, "postgres", "postgres")

    def start(self):
        self.process = start(["/usr/bin/patroni", self.config], self.log,
                             as_user=True)

    def uri(self, user="postgres", db="postgres"):
        return f"postgresql://{user}@127.0.0.1:{self.pg_port}/{db}"

    def api(self, path):
        return get_json(f"http://127.0.0.1:{self.api_port}/{path}")

    def is_primary(self):
        """Patroni says so: it holds the leader key and PostgreSQL runs
        read-write."""
        return self.api("primary")[0] == 200

    def timeline(self):
        """Its PostgreSQL's timeline once it writes (its current WAL
        file's), or None while it is in recovery or answers nothing."""
        try:
            return int(psql(self.uri(), TIMELINE_SQL, timeout=10)) or None
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            return None

    def postmaster(self):
        """Its running postmaster's pid, or None (postmaster.pid outlives
        a postmaster killed, and its pid may be another process's by
        now)."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                running = self.data.encode() in f.read()
        except (OSError, ValueError):
            return None
        return pid if running else None

    def stop(self):
        """Patroni first (so it starts nothing again), then PostgreSQL."""
        if self.process:
            kill_group(self.process)
        postmaster = self.postmaster()
        if postmaster:
            children = subprocess.run(["pgrep", "-P", str(postmaster)],
                                      capture_output=True,
                                      text=True).stdout.split()
            for pid in [postmaster, *map(int, children)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def cluster(member):
    """{name: (role, state)} as `member`'s REST API has it."""
    status, body = member.api("cluster")
    if status != 200 or not body:
        return {}
    return {m["name"]: (m.get("role"), m.get("state"))
            for m in body.get("members", [])}


def leader_and_sync(members):
    """(leader, sync standby), both running, or None."""
    for m in members:
        view = cluster(m)
        leader = [n for n, (r, s) in view.items()
                  if r == "leader" and s == "running"]
        sync = [n for n, (r, s) in view.items()
                if r == "sync_standby" and s in ("running", "streaming")]
        if leader and sync:
            named = {x.name: x for x in members}
            return named[leader[0]], named[sync[0]]
    return None


def crash_until_failover(leader, sync):
    """Kills the leader's postmaster with SIGKILL until Patroni fails over
    to `sync`. With primary_start_timeout 0 Patroni fails over only if it
    finds the sync standby fit to take over (its REST API answering within
    Patroni's 2 s, its WAL within maximum_lag_on_failover); if not (a
    loaded machine), it restarts the primary in place, which is not the
    event under test: the postmaster is killed again, at most
    CRASH_ATTEMPTS times, each in-place restart logged with Patroni's
    reasons."""
    for attempt in range(1, CRASH_ATTEMPTS + 1):
        postmaster = leader.postmaster()
        if postmaster is None:
            raise RuntimeError(f"{leader.name} has no postmaster")
        os.kill(postmaster, signal.SIGKILL)

        def outcome():
            if sync.is_primary():
                return "promoted"
            again = leader.postmaster()
            if again not in (None, postmaster) and leader.is_primary():
                return "restarted"
            return None
        if wait_for(f"{sync.name} promoted or {leader.name} restarted",
                    PROMOTION_BOUND_S, outcome, every=0.05) == "promoted":
            return
        reasons = "; ".join(decisions(leader.log)[-4:])
        log(f"failover: Patroni restarted {leader.name} in place after "
            f"crash {attempt} instead of failing over ({reasons})")
        # Crashed again only once the pair is whole, as the first time.
        wait_for(f"{leader.name} leading {sync.name} again",
                 MEMBER_BOUND_S,
                 lambda: leader_and_sync([leader, sync]) == (leader, sync))
    raise RuntimeError(f"Patroni restarted {leader.name} in place after "
                       f"each of {CRASH_ATTEMPTS} crashes")


def decisions(path):
    """Patroni's own lines in its log (not PostgreSQL's, which share the
    file), less its idle heartbeat."""
    try:
        with open(path, errors="replace") as f:
            return [line for line in f.read().splitlines()
                    if PATRONI_LINE.match(line)
                    and "INFO: no action." not in line]
    except OSError:
        return []


def ours(root, scope):
    """Processes of this test that outlived their parents: PostgreSQL's
    (named after the scope, or with a data directory under root), etcd's
    and Patroni's (their directories are under root)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(
                    errors="replace")
        except OSError:
            continue
        if root in cmdline or f"postgres: {scope}:" in cmdline:
            found.append(int(pid))
    return found


def counter(server, name):
    """A counter's value on the server's /metrics, or None."""
    try:
        with urllib.request.urlopen(
                f"http://127.0.0.1:{server.metrics_port}/metrics",
                timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    match = re.search(rf"^{name}(?:{{}})? ([0-9.e+]+)$", text, re.M)
    return float(match.group(1)) if match else None


def unmonitored(server_binary, directory, uri, expect):
    """A server as a role without pg_monitor cannot see the standby confirm
    a reservation: it must hand out nothing, and name the grant, either
    refusing to start or answering UNAVAILABLE."""
    os.makedirs(directory)
    process = subprocess.Popen(
        [server_binary, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
         f"--db={directory}/hilo.db", f"--store={uri}", "--node_tag=U"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []

    def read():
        for line in process.stderr:
            if len(lines) < 1000:
                lines.append(line.decode(errors="replace").strip())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        started = wait_for("a server without pg_monitor starting or exiting",
                           30, lambda: process.poll() is not None or [
                               m for line in lines
                               if (m := re.search(r" on port (\d+) ", line))])
        if started is True:
            reader.join(timeout=5)
            expect(process.returncode != 0, "a server without pg_monitor "
                   "exited 0")
        else:
            try:
                port = int(started[0].group(1))
                lib.next_range(lib.Endpoint(port).channel(), "unmonitored",
                               timeout=10)
                expect(False, "a role without pg_monitor got a range on a "
                       "cluster with a standby")
            except grpc.RpcError as error:
                expect(error.code() == grpc.StatusCode.UNAVAILABLE,
                       f"without pg_monitor: {error.code()}, expected "
                       "UNAVAILABLE")
        deadline = time.monotonic() + 5
        while (not (said := [x for x in lines if "GRANT pg_monitor" in x])
               and time.monotonic() < deadline):
            time.sleep(0.1)
        expect(bool(said), "a server without pg_monitor did not name the "
               f"grant: {lines[-3:]}")
        if said:
            log(f"without pg_monitor: {said[0]}")
    finally:
        process.kill()
        process.wait()


def moved_lines(server):
    return [line.strip() for line in server.stderr_lines
            if "moved" in line and "reservations" in line]


def main():
    server_binary, draw_binary, *server_flags = sys.argv[1:]
    os.environ["HILO_DRAW"] = draw_binary
    failures = []

    def expect(ok, message):
        if not ok:
            failures.append(message)
            print(f"patroni_test: FAIL {message}", file=sys.stderr,
                  flush=True)

    for tool in ("/usr/bin/patroni", "/usr/bin/patronictl", "/usr/bin/etcd",
                 f"{PG_BIN}/initdb"):
        if not os.access(tool, os.X_OK):
            print(f"patroni_test: {tool} is missing; run "
                  "scripts/install-deps-faults.sh", file=sys.stderr)
            return 1
    # Stopped (ctest's timeout, ^C): clean up all the same. The cluster's
    # processes are not children of this one (PostgreSQL is Patroni's
    # daemon), so nothing else would.
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop, lambda number, _: sys.exit(
            f"patroni_test: stopped by signal {number}"))
    root = tempfile.mkdtemp(prefix="hilo-patroni-")
    os.chmod(root, 0o755)
    scope = f"hilo-test-{os.getpid()}"
    etcd = None
    members = []
    servers = []
    began = time.monotonic()
    try:
        etcd_port, peer_port = free_port(), free_port()
        etcd_dir = os.path.join(root, "etcd")
        etcd = start(["/usr/bin/etcd", "--name=e0", f"--data-dir={etcd_dir}",
                      f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                      f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                      f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                      "--initial-advertise-peer-urls="
                      f"http://127.0.0.1:{peer_port}",
                      f"--initial-cluster=e0=http://127.0.0.1:{peer_port}",
                      f"--initial-cluster-token={scope}",
                      "--initial-cluster-state=new"],
                     os.path.join(root, "etcd.log"))
        wait_for("etcd healthy", ETCD_BOUND_S, lambda: (get_json(
            f"http://127.0.0.1:{etcd_port}/health")[1] or {}).get(
                "health") == "true")
        members = [Member(root, n, scope, etcd_port) for n in ("m0", "m1")]
        # m0 bootstraps; m1 then clones it, so the leader is known.
        members[0].start()
        wait_for("m0 leading", MEMBER_BOUND_S, members[0].is_primary)
        members[1].start()
        leader, sync = wait_for("a leader and a sync standby",
                                MEMBER_BOUND_S,
                                lambda: leader_and_sync(members))
        log(f"cluster up after {time.monotonic() - began:.1f} s: leader "
            f"{leader.name}, sync standby {sync.name}")
        for sql in ("CREATE ROLE hilo LOGIN",
                    "GRANT pg_monitor TO hilo",
                    "CREATE DATABASE hilo OWNER hilo",
                    "CREATE ROLE hilo_unmonitored LOGIN",
                    "CREATE DATABASE hilo_unmonitored OWNER "
                    "hilo_unmonitored"):
            psql(leader.uri(), sql)
        hosts = ",".join(f"127.0.0.1:{m.pg_port}" for m in members)
        query = "?target_session_attrs=read-write&connect_timeout=2"

        unmonitored(server_binary, os.path.join(root, "unmonitored"),
                    "postgresql://hilo_unmonitored@"
                    f"{hosts}/hilo_unmonitored{query}", expect)

        uri = f"postgresql://hilo@{hosts}/hilo{query}"
        for tag in ("A", "B"):
            servers.append(lib.Server(server_binary, f"--store={uri}",
                                      f"--node_tag={tag}",
                                      "--max_range_size=256", *server_flags))
        targets = ",".join(f"127.0.0.1:{s.port}" for s in servers)
        for s in servers:
            took = first_range_after(s, time.monotonic(), SERVE_BOUND_S)
            if took is None:
                raise RuntimeError(f"server on port {s.port} handed out no "
                                   f"range within {SERVE_BOUND_S} s")

        seen = {}  # (collection, number) -> first ID with it
        twice = 0
        waited_calls, longest_ms = 0, 0.0
        moved_so_far = [0] * len(servers)
        moved_total = 0
        leader, sync = leader_and_sync(members) or (None, None)
        if leader is None:
            raise RuntimeError("no leader and sync standby")
        for event, seconds in EVENTS:
            drawing = time.monotonic()
            # Waits are counted from a second before the event.
            draws = [Draw(lang, targets, c, seconds=seconds,
                          mark_after=max(0, EVENT_AFTER_S - 1))
                     for lang in ("cpp", "python") for c in COLLECTIONS]
            time.sleep(EVENT_AFTER_S)
            old, new = leader, sync
            timeline_before = wait_for(f"{leader.name}'s timeline",
                                       MEMBER_BOUND_S, leader.timeline)
            t0 = time.monotonic()
            if event == "switchover":
                done = subprocess.run(
                    ["/usr/bin/patronictl", "-c", leader.config,
                     "switchover", "--leader", leader.name, "--candidate",
                     sync.name, "--force"],
                    capture_output=True, text=True, timeout=60)
                expect(done.returncode == 0, "patronictl switchover exited "
                       f"{done.returncode}: {done.stdout} {done.stderr}")
            elif event == "lost":
                leader.stop()
            else:
                crash_until_failover(leader, sync)
            wait_for(f"{sync.name} promoted", PROMOTION_BOUND_S,
                     sync.is_primary, every=0.05)
            promoted = time.monotonic()
            # One new timeline, or more where Patroni restarted the primary
            # in place first (it promotes it again: see
            # crash_until_failover).
            timelines = wait_for(f"{sync.name}'s timeline", MEMBER_BOUND_S,
                                 sync.timeline) - timeline_before
            serve = [first_range_after(s, promoted, SERVE_BOUND_S)
                     for s in servers]
            for s, took in zip(servers, serve):
                expect(took is not None,
                       f"{event}: server on port {s.port} handed out no "
                       f"range within {SERVE_BOUND_S} s of the promotion")
            rejoined = ""
            if event != "lost":
                # The old leader comes back as the sync standby (while the
                # clients draw), so that the next event can fail over.
                leader, sync = wait_for(
                    f"{old.name} back as the sync standby", MEMBER_BOUND_S,
                    lambda: (pair := leader_and_sync(members)) and
                    pair[1] is old and pair)
                rejoined = (f"; {old.name} the sync standby again "
                            f"{time.monotonic() - promoted:.1f} s after it")
            waits = []
            for d in draws:
                rc, ids, err = d.finish(timeout=60)
                expect(rc == 0, f"{event}: {d.lang} draw from "
                       f"{d.collection} exited {rc}: {err.strip()}")
                waited = Draw.waits(err)
                expect(waited is not None, f"{event}: {d.lang} draw from "
                       f"{d.collection} reported no waits: {err.strip()}")
                if waited:
                    waited_calls += waited[0]
                    longest_ms = max(longest_ms, waited[1])
                waits.append(f"{d.lang}/{d.collection} "
                             + (f"{waited[1]} ms ({waited[0]} calls waited; "
                                f"runway {waited[2]} s a second before)"
                                if waited else "?"))
                expect(len(ids) > 0, f"{event}: {d.lang} draw from "
                       f"{d.collection} drew nothing")
                for doc in ids:
                    m = re.fullmatch(r"([a-z]+)/(\d+)-([A-Z0-9]+)", doc)
                    if not m:
                        expect(False, f"{event}: not an ID: {doc!r}")
                        continue
                    key = (m.group(1), int(m.group(2)))
                    if key in seen:
                        twice += 1
                        if twice <= 5:
                            expect(False, f"{event}: {doc} repeats number "
                                   f"{key[1]} of {seen[key]}")
                    else:
                        seen[key] = doc
            new_moved = []
            for i, s in enumerate(servers):
                moved = moved_lines(s)
                new_moved += moved[moved_so_far[i]:]
                moved_so_far[i] = len(moved)
            served = ", ".join(
                f"{promoted - t0 + t:.2f} s ({t:.2f} s after the promotion)"
                if t is not None else "never" for t in serve)
            log(f"{event} {old.name} -> {new.name}: promoted "
                f"{promoted - t0:.2f} s after the event{rejoined}; servers "
                f"served again after {served}; longest waits "
                f"{'; '.join(waits)}")
            served_by = promoted + max(t or SERVE_BOUND_S for t in serve)
            if served_by > drawing + seconds - 1:
                log(f"  the draws ended {served_by - drawing - seconds:+.1f}"
                    " s from the servers serving again: their waits are "
                    "not all measured")
            for line in new_moved:
                log(f"  {line}")
            # Each new timeline that a server saw: the first server on it
            # moves the collections on, the other finds it recorded. A
            # timeline the primary left before any server came (an
            # in-place restart's) is seen by none.
            moved_total += len(new_moved)
            expect(1 <= len(new_moved) <= timelines,
                   f"{event}: {len(new_moved)} servers said the history "
                   f"changed; expected 1" + (
                       f" to {timelines} ({timelines} new timelines)"
                       if timelines > 1 else ""))
        rewinds = [counter(s, "hilo_store_history_rewinds_total")
                   for s in servers]
        expect(None not in rewinds and sum(rewinds) == moved_total,
               f"hilo_store_history_rewinds_total {rewinds} over the "
               f"fleet; expected {moved_total} in all (the servers' "
               "\"moved on\" lines)")
        log(f"{len(seen)} numbers drawn, {twice} twice; application calls "
            f"that waited for a range across the {len(EVENTS)} events (from "
            f"a second before each): "
            f"{waited_calls}, the longest {longest_ms:.1f} ms (warm-up "
            f"{EVENT_AFTER_S:g} s; server flags "
            f"{' '.join(server_flags) or 'none'})")
        expect(twice == 0, f"{twice} numbers were handed out twice")
    finally:
        for s in servers:
            s.close()
        for m in members:
            m.stop()
        if etcd:
            kill_group(etcd)
        # Whatever outlived its parent (PostgreSQL's backends end when
        # their postmaster does, but not at once).
        deadline = time.monotonic() + 10
        while (left := ours(root, scope)) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        if left:
            print(f"patroni_test: processes left: {left}", file=sys.stderr)
        if failures or sys.exc_info()[0]:
            # etcd's end, and Patroni's decisions (its own lines less
            # its heartbeat: PostgreSQL's output shares its log).
            for name in ("etcd.log", "m0/patroni.log", "m1/patroni.log"):
                path = os.path.join(root, name)
                if not os.path.exists(path):
                    continue
                if name == "etcd.log":
                    with open(path, errors="replace") as f:
                        tail = f.read().splitlines()[-25:]
                else:
                    tail = decisions(path)[-40:]
                print(f"---- the end of {name}", *tail, sep="\n",
                      file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    log(f"took {time.monotonic() - began:.0f} s")
    if failures:
        print(f"patroni_test: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
