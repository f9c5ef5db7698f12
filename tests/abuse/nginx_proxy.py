"""Debian's nginx running deploy/proxy/nginx-hilo.conf in front of a
hilo_server child, as docs/security.md tells operators to: the file as
shipped, with only its four lines marked TEST replaced (listen address,
certificate, key, upstream). A master and one worker, TLS with a
certificate made for 127.0.0.1, on a free port of 127.0.0.1 (nginx cannot
listen on port 0: a port found free is tried, and another one if nginx
finds it taken)."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import abuse_lib as lib

NGINX = "/usr/sbin/nginx"
# HILO_ABUSE_NGINX_CONFIG runs another file instead (by hand: to measure
# what a change to the shipped file does).
CONFIG = os.environ.get("HILO_ABUSE_NGINX_CONFIG") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "proxy",
    "nginx-hilo.conf")


def _replace_line(text, directive, replacement):
    """`text` with its one line of `directive` marked "# TEST" replaced by
    `replacement`; fails the test if the shipped file no longer has
    exactly one."""
    lines = [l for l in text.splitlines()
             if l.split()[:1] == [directive] and "# TEST" in l]
    if len(lines) != 1:
        raise SystemExit(f"{CONFIG}: {len(lines)} lines of {directive!r} "
                         f"marked # TEST; the test replaces exactly one")
    return text.replace(lines[0], replacement)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NginxProxy:
    def __init__(self, upstream_port):
        if not os.access(NGINX, os.X_OK):
            raise SystemExit(f"{NGINX} not found: run "
                             f"scripts/install-deps-abuse.sh")
        self.dir = tempfile.TemporaryDirectory(prefix="hilo-nginx-")
        d = self.dir.name
        # As root, nginx's worker runs as nobody: it must reach its
        # temporary directories in here.
        os.chmod(d, 0o755)
        self.ca = f"{d}/tls.crt"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
             "/CN=hilo-abuse-proxy", "-addext",
             "subjectAltName=IP:127.0.0.1", "-keyout", f"{d}/tls.key",
             "-out", self.ca], check=True, capture_output=True)
        with open(CONFIG) as f:
            shipped = f.read()
        # What the limit on all clients together lets through.
        rate = re.search(r"zone=hilo_total:\S+ rate=(\d+)r/s", shipped)
        burst = re.search(r"zone=hilo_total burst=(\d+)", shipped)
        if not rate or not burst:
            raise SystemExit(f"{CONFIG}: no hilo_total limit_req zone")
        self.total_rate = int(rate.group(1))
        self.total_burst = int(burst.group(1))
        # What the limit per client address lets through.
        rate = re.search(r"zone=hilo_requests:\S+ rate=(\d+)r/s", shipped)
        burst = re.search(r"zone=hilo_requests burst=(\d+)", shipped)
        if not rate or not burst:
            raise SystemExit(f"{CONFIG}: no hilo_requests limit_req zone")
        self.address_rate = int(rate.group(1))
        self.address_burst = int(burst.group(1))
        # How it answers a compressed request itself.
        refusal = re.search(r'add_header grpc-message "([^"]*)"', shipped)
        self.compressed_refusal = refusal.group(1) if refusal else None
        shipped = _replace_line(shipped, "ssl_certificate",
                                f"    ssl_certificate {self.ca};")
        shipped = _replace_line(shipped, "ssl_certificate_key",
                                f"    ssl_certificate_key {d}/tls.key;")
        shipped = _replace_line(shipped, "server",
                                f"    server 127.0.0.1:{upstream_port};")
        self.process = None
        try:
            self._start_on_a_free_port(shipped)
        except BaseException:
            self.close()  # nginx may be running, the directory exists
            raise

    def _start_on_a_free_port(self, shipped):
        d = self.dir.name
        for _ in range(20):
            port = _free_port()
            site = _replace_line(shipped, "listen",
                                 f"    listen 127.0.0.1:{port} ssl http2;")
            with open(f"{d}/hilo.conf", "w") as f:
                f.write(site)
            if self._start(port):
                self.endpoint = lib.Endpoint(port, ca=self.ca)
                return
        raise SystemExit("nginx found no free port in 20 tries")

    def _start(self, port):
        """Starts nginx on `port`; False if the port was taken meanwhile."""
        d = self.dir.name
        temp = "".join(f"  {kind}_temp_path {d}/{kind};\n" for kind in
                       ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(f"{d}/nginx.conf", "w") as f:
            f.write(f"daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\n"
                    f"error_log {d}/error.log warn;\n"
                    f"events {{ worker_connections 1024; }}\n"
                    f"http {{\n  log_format upstream '$upstream_addr';\n"
                    f"  access_log {d}/access.log upstream;\n{temp}"
                    f"  include {d}/hilo.conf;\n}}\n")
        self.process = subprocess.Popen(
            [NGINX, "-e", f"{d}/error.log", "-p", d, "-c", f"{d}/nginx.conf"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.error_log()
                if "Address already in use" in log:
                    return False
                raise SystemExit(f"nginx exited with status "
                                 f"{self.process.returncode}: {log[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                if self.worker_pids():
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"nginx did not listen on {port} within 10 s: "
                         f"{self.error_log()[-2000:]}")

    def error_log(self):
        try:
            with open(f"{self.dir.name}/error.log", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def passed_to_server(self):
        """Requests nginx has finished that it passed on to the server: the
        lines of its access log that name an upstream address."""
        try:
            with open(f"{self.dir.name}/access.log") as f:
                return sum(1 for line in f if line.strip() != "-")
        except OSError:
            return 0

    def worker_pids(self):
        try:
            with open(f"/proc/{self.process.pid}/task/{self.process.pid}"
                      f"/children") as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def alive(self):
        return self.process.poll() is None and bool(self.worker_pids())

    def rss_mb(self):
        """Resident memory of the master and its workers."""
        total = 0
        for pid in [self.process.pid, *self.worker_pids()]:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024

    def close(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # nginx: fast shutdown
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.dir.cleanup()
