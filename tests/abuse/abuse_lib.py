"""What the abuse tests share: a hilo_server child under prlimit and, where
the tests can make them, memory and pids cgroups; the endpoint clients
connect to (the server itself, or a proxy in front of it over TLS); a
well-behaved bystander client on its own connection, a raw HTTP/2 attacker
that writes frames by hand (Debian's python3-h2 stack: hyperframe, hpack),
and the checks every test makes (bystander served, threads and RSS under
bounds, recovery within a second, SIGTERM within the grace period).

Requests and replies are encoded by hand (a few protobuf fields), so the
suite needs no generated stubs."""
import fcntl
import itertools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import grpc
import hpack
from hyperframe import frame as hf

NEXT = "/hilo.v1.HiLo/NextRange"
RETURN_MANY = "/hilo.v1.HiLo/ReturnRanges"
SET_FLOOR = "/hilo.v1.HiLoAdmin/SetFloor"
LIST = "/hilo.v1.HiLoAdmin/ListCollections"
WATCH = "/grpc.health.v1.Health/Watch"
GRACE_S = 3  # --shutdown_grace the tests give the server
# Run the long forms, whose figures docs/reliability.md gives (by hand; not
# in ctest): ATTACK_FILE ATTACK HILO_SERVER --long.
LONG = "--long" in sys.argv
# The cgroup a server runs in: the memory the attack report's server was
# killed in (1 GiB), and a task count far above the server's few dozen
# threads but far below the thousands the attacks once made it start.
CGROUP_MEMORY_MB = 1024
CGROUP_PIDS = 512
F_SETPIPE_SZ = 1031  # Linux's fcntl; Python has fcntl.F_SETPIPE_SZ from 3.10


# ---- protobuf by hand


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_bytes(number, value):
    return varint(number << 3 | 2) + varint(len(value)) + value


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def next_range_request(collection, last_max=0):
    body = field_bytes(1, collection.encode())
    if last_max:
        body += field_varint(4, last_max)
    return body


def return_ranges_request(items):
    """A ReturnRanges of `items` items (collections r0, r1, ...), each with
    a range token, as a client closing with many ranges sends."""
    body = b""
    for i in range(items):
        item = (field_bytes(1, f"r{i}".encode()) + field_varint(2, 100) +
                field_varint(3, 50) + varint(5 << 3 | 1) +
                (i + 1).to_bytes(8, "little"))
        body += field_bytes(1, item)
    return body


def set_floor_request(collection, floor):
    return field_bytes(1, collection.encode()) + field_varint(2, floor)


def list_request(page_size, page_token=b""):
    body = field_varint(1, page_size)
    if page_token:
        body += field_bytes(2, page_token)
    return body


def parse_varints(message):
    """{field number: value} of the varint fields of a message."""
    fields, i = {}, 0
    while i < len(message):
        key, i = read_varint(message, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            fields[number], i = read_varint(message, i)
        elif kind == 2:
            n, i = read_varint(message, i)
            i += n
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        else:
            break
    return fields


def read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def grpc_frame(message):
    return b"\x00" + len(message).to_bytes(4, "big") + message


# ---- the cgroup


_cgroup_ids = itertools.count(1)


class Cgroup:
    """A memory cgroup and a pids cgroup (cgroup v1 hierarchies, or one v2
    group where /sys/fs/cgroup is v2 with both controllers), so the kernel
    bounds the server as a container runtime would, and reports what it
    took. make() returns None, saying why, where the tests cannot create
    them (not root, a read-only or missing hierarchy)."""

    V2 = "/sys/fs/cgroup"
    V1 = {"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids"}

    @classmethod
    def make(cls, memory_mb=CGROUP_MEMORY_MB, pids=CGROUP_PIDS):
        name = f"hilo-abuse-{os.getpid()}-{next(_cgroup_ids)}"
        try:
            with open(f"{cls.V2}/cgroup.subtree_control") as f:
                v2 = {"memory", "pids"} <= set(f.read().split())
        except OSError:
            v2 = False
        dirs = ({"memory": f"{cls.V2}/{name}", "pids": f"{cls.V2}/{name}"}
                if v2 else {c: f"{root}/{name}" for c, root in cls.V1.items()})
        made = []
        try:
            for d in dict.fromkeys(dirs.values()):
                os.mkdir(d)
                made.append(d)
            group = cls(dirs, made, v2)
            group.write("memory", "memory.max" if v2 else
                        "memory.limit_in_bytes", str(memory_mb << 20))
            group.write("pids", "pids.max", str(pids))
            return group
        except OSError as error:
            for d in reversed(made):
                os.rmdir(d)
            print(f"  no cgroup for the server ({error}); prlimit only",
                  flush=True)
            return None

    def __init__(self, dirs, made, v2):
        self.dirs, self.made, self.v2 = dirs, made, v2

    def write(self, controller, name, value):
        with open(f"{self.dirs[controller]}/{name}", "w") as f:
            f.write(value)

    def read(self, controller, name):
        try:
            with open(f"{self.dirs[controller]}/{name}") as f:
                return f.read()
        except OSError:
            return ""

    def procs_files(self):
        """The cgroup.procs a process writes itself into to join."""
        return [f"{d}/cgroup.procs" for d in dict.fromkeys(self.dirs.values())]

    def counter(self, controller, name, key):
        """`key N` of a flat-keyed file such as memory.events."""
        for line in self.read(controller, name).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def oom_kills(self):
        return self.counter("memory", "memory.events" if self.v2 else
                            "memory.oom_control", "oom_kill")

    def pids_refused(self):
        """Forks and thread starts the pids limit refused."""
        return self.counter("pids", "pids.events", "max")

    def memory_peak_mb(self):
        text = self.read("memory", "memory.peak" if self.v2 else
                         "memory.max_usage_in_bytes").strip()
        return round(int(text) / 2**20, 1) if text.isdigit() else None

    def remove(self):
        for d in reversed(self.made):
            try:
                os.rmdir(d)
            except OSError:
                pass
        self.made = []


class CpuCap:
    """Holds a running process to `share` of one core with the cpu
    controller (its own cgroup v1 group, or cpu.max of the server's v2
    group), so a test can make the machine as busy for it as other builds
    sometimes do; make() returns None, saying why, where it cannot."""

    V1 = "/sys/fs/cgroup/cpu"
    PERIOD_US = 100_000

    @classmethod
    def make(cls, pid, share, v2_group=None):
        quota = str(int(share * cls.PERIOD_US))
        try:
            if v2_group:
                path = f"{v2_group}/cpu.max"
                with open(path, "w") as f:
                    f.write(f"{quota} {cls.PERIOD_US}")
                return cls(None)
            made = f"{cls.V1}/hilo-abuse-cpu-{os.getpid()}-{next(_cgroup_ids)}"
            os.mkdir(made)
            cap = cls(made)
            for name, value in (("cpu.cfs_period_us", str(cls.PERIOD_US)),
                                ("cpu.cfs_quota_us", quota),
                                ("cgroup.procs", str(pid))):
                with open(f"{made}/{name}", "w") as f:
                    f.write(value)
            return cap
        except OSError as error:
            print(f"  no cpu cgroup for the server ({error}); not capped",
                  flush=True)
            return None

    def __init__(self, made):
        self.made = made

    def remove(self):
        """After the process has exited (an empty group is removable)."""
        if self.made:
            try:
                os.rmdir(self.made)
            except OSError:
                pass


# ---- the server


_known_flags = {}


def known_flags(binary):
    """Flag names `binary` takes: tests pass new flags only to a server that
    has them, so the same attack can measure an older build ("before")."""
    if binary not in _known_flags:
        text = subprocess.run([binary, "--helpfull"], capture_output=True,
                              text=True).stdout
        _known_flags[binary] = set(re.findall(r"--([a-z_0-9]+)", text))
    return _known_flags[binary]


class Server:
    """A hilo_server child bound to 127.0.0.1:0, under prlimit, in its own
    memory and pids cgroups where the tests can make them. Its stderr is a
    pipe the test reads from start-up on, or with read_stderr=False only
    from read_stderr_from_now_on() (a stalled log collector until then);
    stderr_pipe_bytes sets the pipe's capacity (64 KiB by default, one
    page at least)."""

    def __init__(self, binary, *flags, nofile=None, nproc=None,
                 read_stderr=True, stderr_pipe_bytes=None):
        self.dir = tempfile.TemporaryDirectory(prefix="hilo-abuse-")
        self.cgroup = Cgroup.make()
        command = []
        limits = []
        if nofile:
            limits.append(f"--nofile={nofile}")
        if nproc:
            limits.append(f"--nproc={nproc}")
        if limits:
            command = ["prlimit", *limits, "--"]
        flags = [f for f in flags if f.split("=")[0][2:] in known_flags(binary)]
        # A new SQLite file needs --create_db; a server on a shared store
        # (--store) has no file and refuses the flag.
        shared = any(f.startswith("--store=") for f in flags)
        database = [] if shared else [f"--db={self.dir.name}/hilo.db",
                                      "--create_db", "--sync=normal"]
        command += [binary, "--listen=127.0.0.1:0",
                    "--metrics_listen=127.0.0.1:0", *database,
                    f"--shutdown_grace={GRACE_S}s", *flags]
        if self.cgroup:
            # The shell joins the cgroups, then becomes the server: nothing
            # of the server runs outside them.
            command = ["sh", "-c",
                       'for f in $HILO_CGROUP_PROCS; do echo $$ >"$f" || '
                       'exit 125; done; exec "$@"', "sh", *command]
        env = dict(os.environ)
        if self.cgroup:
            env["HILO_CGROUP_PROCS"] = " ".join(self.cgroup.procs_files())
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE,
                                        env=env)
        self.pid = self.process.pid
        line = self.process.stderr.readline().decode(errors="replace")
        match = re.search(r" on port (\d+) .*metrics port (\d+)", line)
        if not match:
            self.process.kill()
            self.process.wait()
            if self.cgroup:
                self.cgroup.remove()
            sys.exit(f"no start-up line from hilo_server: {line!r}")
        self.port = int(match.group(1))
        self.endpoint = Endpoint(self.port)
        self.metrics_port = int(match.group(2))
        if stderr_pipe_bytes:
            fcntl.fcntl(self.process.stderr.fileno(), F_SETPIPE_SZ,
                        stderr_pipe_bytes)
        self.stderr_bytes = 0
        self.stderr_lines = []
        self.cpu_cap = None
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        if read_stderr:
            self._drain.start()

    def read_stderr_from_now_on(self):
        if not self._drain.is_alive():
            self._drain.start()

    def _read_stderr(self):
        for line in self.process.stderr:
            self.stderr_bytes += len(line)
            if len(self.stderr_lines) < 1000:
                self.stderr_lines.append(line.decode(errors="replace"))

    def status(self, key):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def threads(self):
        return self.status("Threads")

    def cpu_seconds(self):
        """User and system CPU the server has used, its exited threads'
        included (/proc/PID/stat, in clock ticks)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self):
        return self.status("VmRSS") / 1024

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def alive(self):
        return self.process.poll() is None

    def terminate(self):
        """SIGTERM; (exit status, seconds it took), or (None, s) if killed."""
        start = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            rc = self.process.wait(timeout=GRACE_S + 5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            rc = None
        return rc, time.monotonic() - start

    def cap_cpu(self, share):
        """Holds the server to `share` of one core from now on; False if
        it cannot be (no cpu controller the test may use)."""
        v2 = self.cgroup.dirs["memory"] if self.cgroup and self.cgroup.v2 \
            else None
        self.cpu_cap = CpuCap.make(self.pid, share, v2_group=v2)
        return self.cpu_cap is not None

    def close(self):
        if self.alive():
            self.process.kill()
        self.process.wait()
        if self.cgroup:
            self.cgroup.remove()
        if self.cpu_cap:
            self.cpu_cap.remove()
        self.dir.cleanup()


class TempPostgres:
    """A PostgreSQL 15 cluster of its own for one test, from
    testing/temp_postgres.sh (127.0.0.1, a free port, data in a
    temporary directory); `with` gives its URI and destroys it after."""

    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "..", "testing", "temp_postgres.sh")

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="hilo-abuse-pg-")
        started = subprocess.run([self.SCRIPT, "start", f"{self.dir}/pg"],
                                 capture_output=True, text=True)
        if started.returncode != 0:
            self.__exit__()
            sys.exit(f"no PostgreSQL for the test: {started.stderr}")
        return started.stdout.strip()

    def __exit__(self, *_):
        subprocess.run([self.SCRIPT, "destroy", f"{self.dir}/pg"],
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- where clients connect


_channel_ids = itertools.count(1)


class Endpoint:
    """127.0.0.1:`port`: hilo_server itself in plaintext, or, with `ca`
    (the certificate file that signed the server's), a TLS front such as
    the proxy of tests/abuse/nginx_proxy.py."""

    def __init__(self, port, ca=None):
        self.port = port
        self.ca = ca

    def channel(self):
        """A gRPC channel with a connection of its own (a channel argument
        no other channel has)."""
        options = [("grpc.use_local_subchannel_pool", 1),
                   ("hilo.abuse.bystander", next(_channel_ids))]
        target = f"127.0.0.1:{self.port}"
        if self.ca is None:
            return grpc.insecure_channel(target, options=options)
        with open(self.ca, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        return grpc.secure_channel(target, credentials, options=options)

    def connect(self, source="127.0.0.1"):
        """A connected socket (TLS with ALPN h2 where the endpoint has a
        `ca`) from the loopback address `source`: all of 127/8 is this
        machine, so an attacker can come from an address of its own, as
        it would to a proxy that limits per client address."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10,
                                        source_address=(source, 0))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ca is None:
            return sock
        context = ssl.create_default_context(cafile=self.ca)
        context.set_alpn_protocols(["h2"])
        return TlsSocket(sock, context, "127.0.0.1")


class TlsSocket:
    """TLS over a connected socket through memory BIOs: one thread may
    recv() while others sendall(), which an ssl.SSLSocket does not allow
    (OpenSSL's connection objects are not for concurrent use). The raw
    socket's own send and recv may run at once."""

    def __init__(self, sock, context, hostname):
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing,
                                     server_hostname=hostname)
        self._lock = threading.Lock()  # the TLS state
        self._send_lock = threading.Lock()  # keeps records in order
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self._outgoing.read())
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed in the TLS handshake")
                self._incoming.write(data)
        self.sock.sendall(self._outgoing.read())

    def settimeout(self, seconds):
        self.sock.settimeout(seconds)

    def sendall(self, data):
        with self._send_lock:
            with self._lock:
                self._tls.write(data)
                records = self._outgoing.read()
            self.sock.sendall(records)

    def recv(self, size):
        while True:
            with self._lock:
                try:
                    return self._tls.read(size)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLZeroReturnError:
                    return b""
            data = self.sock.recv(65536)
            if not data:
                return b""
            with self._lock:
                self._incoming.write(data)

    def close(self):
        self.sock.close()


# ---- the bystander


def next_range(ch, collection="bystander", last_max=0, timeout=2):
    call = ch.unary_unary(NEXT, request_serializer=None,
                          response_deserializer=None)
    reply = call(next_range_request(collection, last_max), timeout=timeout)
    fields = parse_varints(reply)
    return fields.get(1, 0), fields.get(2, 0)


# How long the bystander's calls may take and still count as served: long
# enough that a loaded CI machine is not an attack, short enough that a
# server that stopped serving fails the test.
BYSTANDER_DEADLINE_S = 5

# How soon after an attack a new client must get a range.
RECOVERY_LIMIT_S = 5.0


class Bystander:
    """A client on its own connection asking for a range every 20 ms, each
    call with a deadline of BYSTANDER_DEADLINE_S."""

    def __init__(self, endpoint, period=0.02):
        self.channel = endpoint.channel()
        self.period = period
        self.latencies = []  # (time, seconds or None for a failure)
        self.errors = []
        self.refusals = []  # times of failures that were a proxy's 429
        self._stop = threading.Event()
        next_range(self.channel, timeout=5)  # connected before the attack
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        high = 0
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                low, high_now = next_range(self.channel,
                                           timeout=BYSTANDER_DEADLINE_S)
                if low <= high:
                    self.errors.append(f"range {low}-{high_now} not above "
                                       f"{high}")
                high = high_now
                self.latencies.append((start, time.monotonic() - start))
            except grpc.RpcError as error:
                self.latencies.append((start, None))
                if error.code() == grpc.StatusCode.UNAVAILABLE and \
                        "status: 429" in (error.details() or ""):
                    self.refusals.append(start)
                elif len(self.errors) < 5:
                    self.errors.append(f"{error.code()}: {error.details()}")
            self._stop.wait(self.period)

    def window(self, since, until=None):
        until = until or time.monotonic()
        return [l for t, l in self.latencies if since <= t < until]

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.channel.close()


class BystanderProcess:
    """A Bystander in a Python process of its own (this file run with
    --bystander), so that the attack's threads, which share this process's
    interpreter lock, cannot delay its calls: its latencies are the
    server's (and the proxy's), not this process's. The same fields and
    methods as Bystander, filled in when it stops; its times are
    time.monotonic()'s, which every process of the machine shares."""

    def __init__(self, endpoint):
        self.latencies, self.errors, self.refusals = [], [], []
        command = [sys.executable, os.path.abspath(__file__), "--bystander",
                   str(endpoint.port)] + ([endpoint.ca] if endpoint.ca else [])
        # Its calls' errors are in `errors`; gRPC's own lines about the
        # proxy's 429 pages would only bury the figures.
        env = dict(os.environ, GRPC_VERBOSITY="NONE")
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True,
                                         env=env)
        ready = self._process.stdout.readline()
        if ready.strip() != "ready":
            self._process.kill()
            self._process.wait()
            raise RuntimeError(f"the bystander process did not start: "
                               f"{ready!r}")

    def window(self, since, until=None):
        return Bystander.window(self, since, until)

    def stop(self):
        out, _ = self._process.communicate("stop\n", timeout=30)
        found = json.loads(out)
        self.latencies = [tuple(l) for l in found["latencies"]]
        self.errors, self.refusals = found["errors"], found["refusals"]


def run_bystander_process(port, ca):
    """BystanderProcess's other end: "ready" once the first range came,
    then, when stdin says stop, what the bystander saw as one JSON line."""
    bystander = Bystander(Endpoint(int(port), ca))
    print("ready", flush=True)
    sys.stdin.readline()
    bystander.stop()
    print(json.dumps({"latencies": bystander.latencies,
                      "errors": bystander.errors,
                      "refusals": bystander.refusals}), flush=True)


def summary(latencies):
    ok = sorted(l for l in latencies if l is not None)
    failed = sum(1 for l in latencies if l is None)
    if not ok:
        return {"calls": len(latencies), "failed": failed}
    return {"calls": len(latencies), "failed": failed,
            "p50_ms": round(1000 * statistics.median(ok), 1),
            "p99_ms": round(1000 * ok[min(len(ok) - 1,
                                          int(len(ok) * 0.99))], 1),
            "max_ms": round(1000 * ok[-1], 1)}


# ---- the attacker's raw HTTP/2


class RawH2:
    """One HTTP/2 connection written frame by frame. With read=True a
    thread reads (and discards) what the server sends, acknowledging its
    SETTINGS and PINGs but never granting flow-control credit; with
    read=False nothing is ever read."""

    def __init__(self, endpoint, window=65535, read=True, source="127.0.0.1"):
        self.sock = endpoint.connect(source)
        self.encoder = hpack.Encoder()
        self.next_stream = 1
        self.lock = threading.Lock()
        self.closed = False
        self.resets = 0
        self.goaway = False
        settings = hf.SettingsFrame(0)
        settings.settings[hf.SettingsFrame.INITIAL_WINDOW_SIZE] = window
        settings.settings[hf.SettingsFrame.ENABLE_PUSH] = 0
        self.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings.serialize())
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def send(self, data):
        with self.lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                self.closed = True
                return False

    def _read(self):
        buffer = b""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                buffer += data
                while len(buffer) >= 9:
                    header, length = hf.Frame.parse_frame_header(
                        memoryview(buffer[:9]))
                    if len(buffer) < 9 + length:
                        break
                    body = buffer[9:9 + length]
                    buffer = buffer[9 + length:]
                    if isinstance(header, hf.SettingsFrame) and \
                            "ACK" not in header.flags:
                        self.send(hf.SettingsFrame(0, flags=["ACK"])
                                  .serialize())
                    elif isinstance(header, hf.PingFrame) and \
                            "ACK" not in header.flags:
                        ping = hf.PingFrame(0, flags=["ACK"])
                        ping.opaque_data = body
                        self.send(ping.serialize())
                    elif isinstance(header, hf.RstStreamFrame):
                        self.resets += 1
                    elif isinstance(header, hf.GoAwayFrame):
                        self.goaway = True
        except Exception:  # a reset connection or a frame we cannot parse
            pass
        self.closed = True

    def headers(self, path, end_stream=False, extra=()):
        stream = self.next_stream
        self.next_stream += 2
        block = self.encoder.encode(
            [(":method", "POST"), (":scheme", "http"), (":path", path),
             (":authority", "hilo"), ("content-type", "application/grpc"),
             ("te", "trailers"), *extra])
        frame = hf.HeadersFrame(stream, data=block,
                                flags=["END_HEADERS"] +
                                (["END_STREAM"] if end_stream else []))
        return stream, frame.serialize()

    def call(self, path, message, extra=()):
        """Frames of a whole unary call on a new stream (not yet sent)."""
        stream, headers = self.headers(path, extra=extra)
        data = hf.DataFrame(stream, data=grpc_frame(message),
                            flags=["END_STREAM"])
        return headers + data.serialize()

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def gzip_bomb(inflated_bytes):
    """A gRPC message body that gzip inflates to `inflated_bytes` zero
    bytes: 63 MiB take 64,234 bytes, under the 64 KiB request limit."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header
    return packer.compress(bytes(inflated_bytes)) + packer.flush()


def one_call(endpoint, path, frame, extra=(), source="127.0.0.1",
             timeout=10):
    """One unary call written by hand on a connection of its own: HEADERS
    with `extra` header fields, then `frame` (a whole gRPC frame, prefix
    included) in DATA frames of 16 KiB, the last ending the stream. The
    frame must fit the connection's first flow-control window (65,535
    bytes), so that nothing is waited for before it is sent. Returns the
    reply's trailers as {name: value} (grpc-status, grpc-message, ...),
    {":rst_stream": code} if the peer reset the stream, or {":closed":
    reason} if the connection ended or `timeout` passed first."""
    if len(frame) > 65535:
        raise ValueError(f"a frame of {len(frame)} bytes does not fit the "
                         f"first flow-control window")
    try:
        sock = endpoint.connect(source)
    except OSError as error:
        return {":closed": f"connect: {error}"}
    try:
        sock.settimeout(timeout)
        encoder, decoder = hpack.Encoder(), hpack.Decoder()
        block = encoder.encode(
            [(":method", "POST"), (":scheme", "http"), (":path", path),
             (":authority", "hilo"), ("content-type", "application/grpc"),
             ("te", "trailers"), *extra])
        data = b"".join(
            hf.DataFrame(1, data=frame[i:i + 16384],
                         flags=["END_STREAM"] if i + 16384 >= len(frame)
                         else []).serialize()
            for i in range(0, len(frame), 16384))
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                     hf.SettingsFrame(0).serialize() +
                     hf.HeadersFrame(1, data=block,
                                     flags=["END_HEADERS"]).serialize() +
                     data)
        buffer, fields, deadline = b"", b"", time.monotonic() + timeout
        while time.monotonic() < deadline:
            while len(buffer) >= 9:
                header, length = hf.Frame.parse_frame_header(
                    memoryview(buffer[:9]))
                if len(buffer) < 9 + length:
                    break
                header.parse_body(memoryview(buffer[9:9 + length]))
                buffer = buffer[9 + length:]
                if isinstance(header, hf.SettingsFrame) and \
                        "ACK" not in header.flags:
                    sock.sendall(hf.SettingsFrame(0, flags=["ACK"])
                                 .serialize())
                elif isinstance(header, (hf.HeadersFrame,
                                         hf.ContinuationFrame)):
                    fields += header.data
                    if "END_HEADERS" not in header.flags:
                        continue
                    decoded = dict(decoder.decode(fields, raw=False))
                    fields = b""
                    if header.stream_id == 1 and \
                            ("END_STREAM" in header.flags or
                             "grpc-status" in decoded):
                        return decoded
                elif isinstance(header, hf.RstStreamFrame) and \
                        header.stream_id == 1:
                    return {":rst_stream": header.error_code}
                elif isinstance(header, hf.GoAwayFrame):
                    return {":closed": f"GOAWAY {header.error_code}"}
            data = sock.recv(65536)
            if not data:
                return {":closed": "end of stream"}
            buffer += data
        return {":closed": "timeout"}
    except (OSError, ValueError) as error:
        return {":closed": str(error)}
    finally:
        sock.close()


# ---- the checks


class Checks:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.figures = {}

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)
            print(f"FAIL: {message}", flush=True)

    def figure(self, key, value):
        self.figures[key] = value
        print(f"  {key}: {value}", flush=True)

    def finish(self):
        print(f"{self.name}: {'FAILED' if self.failures else 'passed'}",
              flush=True)
        sys.exit(1 if self.failures else 0)


def watch(server, checks, seconds, step=0.25, proxy=None):
    """Peak threads and RSS of the server, and RSS of the `proxy` in front
    of it (0 without one), over `seconds`."""
    peak_threads = peak_rss = peak_proxy_rss = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and server.alive():
        peak_threads = max(peak_threads, server.threads())
        peak_rss = max(peak_rss, server.rss_mb())
        if proxy:
            peak_proxy_rss = max(peak_proxy_rss, proxy.rss_mb())
        time.sleep(step)
    return peak_threads, peak_rss, peak_proxy_rss


def recovery_seconds(endpoint, limit=None):
    """Seconds until a fresh connection gets a range; None if none did
    within `limit` (default RECOVERY_LIMIT_S; each attempt waits up to half
    a second)."""
    limit = RECOVERY_LIMIT_S if limit is None else limit
    start = time.monotonic()
    while time.monotonic() - start < limit:
        ch = endpoint.channel()
        try:
            next_range(ch, "recovery",
                       timeout=max(0.05, min(0.5, limit - (time.monotonic()
                                                           - start))))
            return time.monotonic() - start
        except grpc.RpcError:
            time.sleep(0.02)
        finally:
            ch.close()
    return None


def send_round_robin(stop, conns, count, send):
    """For i below `count`, send(conns[i % len(conns)], i) until `stop` is
    set; then holds the connections open until `stop`, and closes them.
    The body of an attack that spreads streams over many connections."""
    for i in range(count):
        if stop.is_set():
            break
        send(conns[i % len(conns)], i)
    stop.wait()
    for h2 in conns:
        h2.close()


def reconnecting(stop, endpoint, source="127.0.0.1", **options):
    """RawH2 connections from `source` to `endpoint`, a new one each time
    the caller asks, until `stop` is set; each is closed when the next is
    asked for. A refused connection (a limit on connections per address)
    is tried again 10 ms later."""
    while not stop.is_set():
        try:
            h2 = RawH2(endpoint, source=source, **options)
        except OSError:
            stop.wait(0.01)
            continue
        try:
            yield h2
        finally:
            h2.close()


def run_in_threads(stop, bodies):
    """Runs each body(stop) in a thread of its own and waits for them all:
    an attack made of several attackers."""
    threads = [threading.Thread(target=body, args=(stop,), daemon=True)
               for body in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def attack_and_finish(checks, server, attack, **bounds):
    """run_attack(checks, server, attack, **bounds); then closes the
    server whatever happened, and exits with the verdict."""
    try:
        run_attack(checks, server, attack, **bounds)
    finally:
        server.close()
    checks.finish()


def run_attack(checks, server, attack, seconds, max_threads, max_rss_mb,
               needs_proxy=False,
               unloaded_seconds=0.5, proxy=None, max_proxy_rss_mb=0,
               min_served_share=1.0, sigterm_cpu_share=None,
               max_p99_ms=None, bystander_process=False):
    """Runs attack(stop_event) in a thread for `seconds` while a bystander
    asks for ranges; then checks what must hold however loaded the machine
    is: the server alive and not killed for memory, its threads and RSS
    within bounds, every bystander call served within
    BYSTANDER_DEADLINE_S, a new client served within RECOVERY_LIMIT_S, and
    SIGTERM within the grace period. The bystander's latencies (p50, p99,
    max) are figures of the report, not pass/fail lines: they measure the
    machine as much as the server. With `max_p99_ms` (an attack whose issue
    gives a figure, and far below it what the server holds it to), the p99
    of the bystander's calls during the attack must be within it too.
    The bystander's unloaded figures are of the `unloaded_seconds` before.
    With a `proxy` (tests/abuse/nginx_proxy.py) in front of the server,
    the bystander and the recovering client connect through it, and the
    proxy must stay up with its RSS within `max_proxy_rss_mb`; below a
    `min_served_share` of 1, the proxy may refuse that share of the
    bystander's calls with 429 (a limit on all clients together).

    needs_proxy: an attack gRPC 1.51 cannot be made to hold (README
    "Security": a proxy in front stops it). Then only what hilo still
    promises is asserted (alive, served again within 5 s, SIGTERM within
    the grace period plus 2 s); the bystander's figures and RSS are
    reported.
    sigterm_cpu_share: SIGTERM is sent with the server held to that share
    of one core (CpuCap), as a busy machine leaves it.
    bystander_process: the bystander runs in a process of its own
    (BystanderProcess), for attacks whose many threads would otherwise
    delay its calls in this one."""
    baseline_rss = server.rss_mb()
    checks.figure("threads_before", server.threads())
    checks.figure("rss_mb_before", round(baseline_rss, 1))
    front = proxy.endpoint if proxy else server.endpoint
    if proxy:
        checks.figure("proxy_rss_mb_before", round(proxy.rss_mb(), 1))
    bystander = (BystanderProcess if bystander_process else Bystander)(front)
    time.sleep(unloaded_seconds)
    stop = threading.Event()
    attack_started = time.monotonic()
    attacker = threading.Thread(target=attack, args=(stop,), daemon=True)
    attacker.start()
    peak_threads, peak_rss, peak_proxy_rss = watch(server, checks, seconds,
                                                   proxy=proxy)
    attack_ended = time.monotonic()
    stop.set()
    attacker.join(timeout=10)
    # Stopped first, so that every call the bystander began during the attack
    # has ended (within its deadline) and is counted with its outcome.
    bystander.stop()
    # Read once it stopped: a BystanderProcess reports only then.
    checks.figure("bystander_unloaded",
                  summary(bystander.window(0, attack_started)))
    during = summary(bystander.window(attack_started, attack_ended))
    checks.figure("peak_threads", peak_threads)
    checks.figure("peak_rss_mb", round(peak_rss, 1))
    checks.figure("bystander_during_attack", during)
    checks.expect(server.alive(), "the server died during the attack")
    if proxy:
        checks.figure("proxy_peak_rss_mb", round(peak_proxy_rss, 1))
        checks.expect(proxy.alive(), f"nginx died during the attack: "
                      f"{proxy.error_log()[-1000:]}")
        checks.expect(peak_proxy_rss <= max_proxy_rss_mb,
                      f"nginx's RSS reached {peak_proxy_rss:.0f} MB; the "
                      f"bound is {max_proxy_rss_mb}")
    if server.cgroup:
        checks.figure("cgroup_memory_peak_mb", server.cgroup.memory_peak_mb())
        checks.expect(server.cgroup.oom_kills() == 0,
                      f"the kernel killed the server for memory in its "
                      f"{CGROUP_MEMORY_MB} MiB cgroup")
        checks.expect(server.cgroup.pids_refused() == 0,
                      f"the server hit its cgroup's limit of {CGROUP_PIDS} "
                      f"tasks ({server.cgroup.pids_refused()} refused)")
    if needs_proxy:
        expect_recovery(checks, front, RECOVERY_LIMIT_S,
                        f"no range for a new client within "
                        f"{RECOVERY_LIMIT_S:.0f} s after the attack")
        # gRPC 1.51 still tears down the attack's streams when the grace
        # period ends, which the server does not wait for more than half a
        # second (docs/server.md): 2 s more for a start and an exit on a
        # machine at load 20-30 (3.6-4.8 s seen at a 10-15 % share of a core).
        if sigterm_cpu_share and server.cap_cpu(sigterm_cpu_share):
            checks.figure("sigterm_cpu_share", sigterm_cpu_share)
        expect_clean_sigterm(checks, server, GRACE_S + 2)
        return
    checks.expect(peak_threads <= max_threads,
                  f"{peak_threads} threads; the bound is {max_threads}")
    checks.expect(peak_rss <= max_rss_mb,
                  f"RSS reached {peak_rss:.0f} MB; the bound is {max_rss_mb}")
    # The same window as `during`: a refusal after it is not among its calls.
    refused = sum(1 for t in bystander.refusals
                  if attack_started <= t < attack_ended)
    if proxy:
        checks.figure("bystander_refused_by_proxy", refused)
    calls = during["calls"]
    checks.expect(calls > 0 and during.get("failed", 1) ==
                  (refused if min_served_share < 1 else 0) and
                  calls - refused >= min_served_share * calls,
                  f"the bystander's calls failed during the attack: "
                  f"{during} ({refused} refused by the proxy; at least "
                  f"{min_served_share:.0%} must be served) {bystander.errors}")
    checks.expect(not bystander.errors or during.get("failed", 0) > 0,
                  f"bystander: {bystander.errors}")
    if max_p99_ms is not None:
        checks.expect(during.get("p99_ms", max_p99_ms + 1) < max_p99_ms,
                      f"the bystander's p99 during the attack was "
                      f"{during.get('p99_ms')} ms; the bound is {max_p99_ms} ms")
    expect_recovery(checks, front, RECOVERY_LIMIT_S,
                    f"a new client got no range within {RECOVERY_LIMIT_S:.0f} "
                    f"s after the attack")
    expect_clean_sigterm(checks, server, GRACE_S + 1,
                         f"; the grace period is {GRACE_S} s")


def expect_recovery(checks, front, limit, failure):
    """Records how long a new client of `front` waited for a range
    (recovery_s) and expects it got one within `limit` seconds; `failure`
    says otherwise."""
    recovered = recovery_seconds(front, limit=limit)
    checks.figure("recovery_s", None if recovered is None
                  else round(recovered, 3))
    checks.expect(recovered is not None and recovered <= limit,
                  f"{failure} ({recovered})")


def expect_clean_sigterm(checks, server, limit, note=""):
    """Sends SIGTERM, records how long the exit took (sigterm_s) and
    expects exit status 0 within `limit` seconds; `note` ends the failure
    message."""
    rc, took = server.terminate()
    checks.figure("sigterm_s", round(took, 2))
    checks.expect(rc == 0 and took <= limit,
                  f"SIGTERM: exit {rc} after {took:.1f} s{note}")


if __name__ == "__main__" and sys.argv[1:2] == ["--bystander"]:
    run_bystander_process(*sys.argv[2:3], *(sys.argv[3:4] or [None]))
