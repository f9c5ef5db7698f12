#!/usr/bin/python3
"""monitoring.live_prometheus: deploy/monitoring against a real Prometheus.

Starts a hilo_server (gRPC and metrics on free ports, a database in a temp
folder) and Debian's prometheus (scraping it every second, evaluating
deploy/monitoring/hilo-rules.yaml every second), sends traffic with the hilo
CLI (NextRange and ReturnRange on two collections, a refused NextRange, the
admin calls GetCollection and ListCollections), waits until Prometheus has
scraped it, then checks through Prometheus's HTTP API that

  - every rule of the rules file is loaded and evaluates without error;
  - every recording rule's expression returns data;
  - every alert's expression parses and evaluates, and the signal it
    compares with a threshold returns data (an alert on a healthy node
    rightly returns nothing itself);
  - every target expression of the Grafana dashboard, with its template
    variables set from their own label_values queries, returns data.

Expressions are read from the files, never listed here. Both processes are
stopped whatever happens (and die with this script if it is killed).

  live_prometheus_test.py SOURCE_DIR HILO_SERVER HILO_CLI
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from monitoring_lib import Failure, Test, free_port, read, wait_for

TEST = Test("monitoring.live_prometheus")
log = TEST.log
PROMETHEUS = "/usr/bin/prometheus"
# How long Prometheus may take to start, scrape and evaluate everything.
DEADLINE_SECONDS = 90
# What the dashboard's Grafana variables stand for here.
GRAFANA_INTERVALS = {"__rate_interval": "1m", "__interval": "1s",
                     "__range": "5m"}


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path, **params):
        url = f"{self.base}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return json.load(reply)
        except urllib.error.HTTPError as e:
            # 400 and 422 carry the parse or evaluation error as JSON.
            return json.load(e)

    def ready(self):
        try:
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def query(self, expr):
        """The instant vector of expr; Failure naming expr if it errs."""
        reply = self.get("/api/v1/query", query=expr)
        if reply.get("status") != "success":
            raise Failure(f"expression does not evaluate: {expr}\n  "
                          f"{reply.get('errorType')}: {reply.get('error')}")
        return reply["data"]["result"]


def rule_checks(prom, rules_file, deadline):
    """(what, expr) for every rule, once all are loaded and healthy.

    The expressions come from Prometheus's API, as it loaded them from the
    file; the file's own count of rules guards against any left out. Each
    alert's expression must parse and evaluate; what must return data is
    the signal it compares with a threshold.
    """
    def evaluated():
        groups = prom.get("/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        if rules and all(r.get("lastEvaluation", "").startswith("20")
                         for r in rules):
            return groups
        return None
    groups = wait_for("rules evaluated", evaluated, deadline)
    files = {g["file"] for g in groups}
    if files != {rules_file}:
        raise Failure(f"rule groups come from {files}, expected {rules_file}")
    expected = count_rules_in_file(rules_file)
    rules = [r for g in groups for r in g["rules"]]
    if len(rules) != expected:
        raise Failure(f"Prometheus loaded {len(rules)} rules; the file has "
                      f"{expected}")
    checks = []
    for rule in rules:
        name = rule.get("name")
        if rule.get("health") != "ok" or rule.get("lastError"):
            raise Failure(f"rule {name} is {rule.get('health')}: "
                          f"{rule.get('lastError')}\n  expr: {rule['query']}")
        if rule["type"] == "recording":
            checks.append((f"recording rule {name}", rule["query"]))
            continue
        prom.query(rule["query"])  # parses and evaluates
        signal_expr = threshold_signal(rule["query"])
        if signal_expr is None:
            raise Failure(
                f"alert {name}: expression is not SIGNAL OP NUMBER, so "
                f"its signal cannot be checked: {rule['query']}")
        checks.append((f"alert {name} ({rule['labels'].get('severity')}), "
                       f"its signal", signal_expr))
    return checks


def check_all(prom, checks, deadline):
    """Polls until every expression returns data; Failure listing those
    that still return nothing at the deadline."""
    pending = list(checks)
    while True:
        still = []
        for what, expr in pending:
            if prom.query(expr):
                log(f"ok: {what}: {' '.join(expr.split())}")
            else:
                still.append((what, expr))
        pending = still
        if not pending:
            return
        if time.monotonic() > deadline:
            raise Failure("these expressions returned no data within "
                          f"{DEADLINE_SECONDS} s:\n" + "\n".join(
                              f"  {what}: {' '.join(expr.split())}"
                              for what, expr in pending))
        time.sleep(0.5)


def count_rules_in_file(path):
    text = read(path)
    return len(re.findall(r"^\s*- (?:record|alert):", text, re.MULTILINE))


def threshold_signal(expr):
    """The left side of `SIGNAL OP NUMBER`, or None."""
    m = re.fullmatch(r"\s*(.+?)\s*(==|!=|>=|<=|>|<)\s*(?:bool\s+)?"
                     r"[-+]?[0-9.]+(?:e[-+]?[0-9]+)?\s*", expr, re.DOTALL)
    return m.group(1) if m else None


def dashboard_targets(path):
    """(panel title, expr) of every target, and the template variables."""
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    targets = []

    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    targets.append((panel.get("title", "?"), target["expr"]))
            walk(panel.get("panels", []))
    walk(dash.get("panels", []))
    return targets, dash.get("templating", {}).get("list", [])


def variable_values(prom, variables, deadline):
    """Each query variable's first value from its label_values query."""
    values = dict(GRAFANA_INTERVALS)
    for var in variables:
        if var["type"] == "datasource":
            continue
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query or "")
        if var["type"] != "query" or not m:
            raise Failure(f"dashboard variable {var['name']}: cannot "
                          f"evaluate {var['type']} query {query!r}")
        selector, label = substitute(m.group(1), values), m.group(2)

        def label_values(selector=selector, label=label):
            reply = prom.get("/api/v1/series", **{"match[]": selector})
            if reply.get("status") != "success":
                raise Failure(f"variable {var['name']}: {selector}: "
                              f"{reply.get('error')}")
            return sorted({s[label] for s in reply["data"] if label in s})
        found = wait_for(f"dashboard variable {var['name']}: "
                         f"label_values({selector}, {label}) is empty",
                         label_values, deadline)
        # As Grafana writes a multi-value variable into PromQL: a regular
        # expression, its metacharacters escaped inside a PromQL string.
        values[var["name"]] = (re.escape(found[0]).replace("\\", "\\\\")
                               if var.get("multi") else found[0])
        log(f"ok: variable ${var['name']} = {values[var['name']]} "
            f"(of {found})")
    return values


def substitute(expr, values):
    def one(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise Failure(f"dashboard expression uses ${name}, which is "
                          f"neither a template variable nor a Grafana "
                          f"interval: {expr}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def traffic(cli, port, log_path):
    target = f"--target=127.0.0.1:{port}"
    calls = [
        ([target, "next", "orders", "-n", "3"], 0),
        ([target, "next", "users", "-n", "40"], 0),
        # A third collection, past --max_collections=2: RESOURCE_EXHAUSTED,
        # the errors panel's data. (A name over 256 bytes no longer does:
        # the client refuses it without a call.)
        ([target, "next", "refused"], 1),
        ([target, "get", "orders"], 0),
        ([target, "list"], 0),
    ]
    with open(log_path, "a") as out:
        for args, status in calls:
            rc = subprocess.run([cli] + args, stdout=out, stderr=out,
                                timeout=30, check=False).returncode
            if rc != status:
                raise Failure(f"hilo {' '.join(args[1:])[:60]} exited {rc}, "
                              f"expected {status}: {read(log_path)}")


def check(src, server_bin, cli, work):
    rules_file = os.path.join(os.path.abspath(src), "deploy", "monitoring",
                              "hilo-rules.yaml")
    dashboard = os.path.join(src, "deploy", "monitoring", "hilo-dashboard.json")
    if not os.access(PROMETHEUS, os.X_OK):
        raise Failure(f"{PROMETHEUS} is missing: install Debian's "
                      "prometheus (scripts/install-deps.sh)")
    deadline = time.monotonic() + DEADLINE_SECONDS
    grpc_port, metrics_port = TEST.start_hilo_server(
        server_bin, work, "--metrics_listen=127.0.0.1:0", "--node_tag=M",
        "--max_collections=2")

    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {rules_file}
scrape_configs:
  - job_name: hilo
    static_configs:
      - targets: ['127.0.0.1:{metrics_port}']
""")
    prom_port = free_port()
    prom_log = os.path.join(work, "prometheus.log")
    prometheus = TEST.start(
        [PROMETHEUS, f"--config.file={config}",
         f"--storage.tsdb.path={os.path.join(work, 'data')}",
         f"--web.listen-address=127.0.0.1:{prom_port}",
         "--log.level=warn"], prom_log)
    prom = Prometheus(prom_port)
    wait_for("prometheus ready", prom.ready, deadline, prometheus, prom_log)
    log(f"prometheus {prom_port} ready")

    traffic(cli, grpc_port, os.path.join(work, "cli.log"))
    # Three scrapes after the traffic: counters have moved in range.
    after = time.time()
    wait_for("three scrapes of hilo_server after the traffic",
             lambda: prom.query(
                 'count_over_time(up{job="hilo"}'
                 f'[{int(time.time() - after) + 1}s]) >= 3'),
             deadline, prometheus, prom_log)
    up = prom.query('up{job="hilo"}')
    if [s["value"][1] for s in up] != ["1"]:
        raise Failure(f"up{{job=\"hilo\"}} is {up}; hilo_server is not "
                      f"being scraped ({read(prom_log)})")

    checks = rule_checks(prom, rules_file, deadline)
    rules = len(checks)
    targets, variables = dashboard_targets(dashboard)
    values = variable_values(prom, variables, deadline)
    checks += [(f"dashboard panel \"{title}\"", substitute(expr, values))
               for title, expr in targets]
    check_all(prom, checks, deadline)
    log(f"{rules} rules and {len(targets)} dashboard targets return data")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(TEST.run(lambda work: check(*sys.argv[1:], work)))
