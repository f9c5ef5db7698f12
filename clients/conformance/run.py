#!/usr/bin/python3
"""The hilo client conformance runner.

    run.py --server PATH/TO/hilo_server [--client NAME] [--scenario GLOB]
           [--param NAME=NUMBER]... [--list] --driver CMD [ARG...]

Runs each scenario of clients/conformance/scenarios/*.json (see README.md in
this folder for their format) against one client, through that client's
driver (PROTOCOL.md): real hilo_server processes on free ports with their
databases in a temporary directory, killed with SIGKILL, paused with
SIGSTOP, and scripted proxies (proxy.py) in front of real servers where a
scenario needs a reply that breaks the contract.

Whatever a scenario says, every ID any of its clients handed out is checked:
no ID twice, every ID well formed (collection, separator, a number >= 1, "-",
a tag of 1-4 characters of A-Z0-9), and, where the client reached the nodes
only through proxies, inside a range that node issued with that tag. Every
returned range is checked against the range it names (proxy.py).

--client NAME looks NAME up in expected_failures.json: a scenario listed
there for NAME must fail (XFAIL); if it passes, that is an error, so the mark
gets removed. A scenario under cannot_run for NAME is skipped (SKIP), with
the reason: the suite's tools cannot run it against that client. Exit status 0 when every scenario passed or failed as
expected, 1 otherwise, 2 for bad usage.

--param NAME=NUMBER sets a parameter that scenarios declare under "params"
(with their default) and use as the string "$NAME" in place of a number, so
that a scenario can also be run longer than CI runs it (an outage of 180 s
rather than 30 s). NUMBER is a whole number above 0. Every --param must
be declared by a scenario run.

Needs the generated Python stubs (module hilo.v1) on PYTHONPATH.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from outcomes import Failure, Skip  # noqa: E402
from processes import Watchdog  # noqa: E402
from scenario import Scenario  # noqa: E402


def parse_args(argv: List[str]):
    opts = {"server": None, "client": None, "scenario": "*", "list": False,
            "driver": None, "param": {}}
    own = {"--server", "--client", "--scenario", "--list", "--driver",
           "--param"}
    i = 0
    usage = ("usage: run.py --server PATH/TO/hilo_server [--client NAME] "
             "[--scenario GLOB] [--param NAME=NUMBER]... [--list] "
             "--driver CMD [ARG...]")
    while i < len(argv):
        a = argv[i]
        key, _, value = a.partition("=")
        if key not in own:
            print(f"{usage}\nrun.py: unknown argument {a!r}", file=sys.stderr)
            sys.exit(2)
        if key == "--list":
            opts["list"] = True
            i += 1
            continue
        if key == "--driver":
            j = i + 1
            cmd = [value] if value else []
            while j < len(argv) and argv[j].partition("=")[0] not in own:
                cmd.append(argv[j])
                j += 1
            opts["driver"] = cmd
            i = j
            continue
        if not value:
            if i + 1 >= len(argv):
                print(f"{usage}\nrun.py: {key} needs a value",
                      file=sys.stderr)
                sys.exit(2)
            value = argv[i + 1]
            i += 1
        i += 1
        if key == "--param":
            # A positive whole number of decimal digits: int() alone would
            # take "-5", " 5" and "1_000", and an outage or a bound of 0 or
            # less is no test of recovery.
            name, _, number = value.partition("=")
            if not name or not re.fullmatch(r"[0-9]+", number) \
                    or int(number) < 1:
                print(f"{usage}\nrun.py: --param {value!r} is not "
                      f"NAME=NUMBER (a whole number above 0)",
                      file=sys.stderr)
                sys.exit(2)
            opts["param"][name] = int(number)
            continue
        opts[key[2:]] = value
    if not opts["list"] and (not opts["server"] or not opts["driver"]):
        print(f"{usage}\nrun.py: --server and --driver are needed",
              file=sys.stderr)
        sys.exit(2)
    return opts


def with_params(spec: Dict, given: Dict[str, int]) -> Dict:
    """The scenario with each string "$NAME" replaced by that parameter's
    value: the one given, else the default its "params" declares."""
    values = dict(spec.get("params", {}))
    values.update({k: v for k, v in given.items() if k in values})

    def fill(x):
        if isinstance(x, dict):
            return {k: fill(v) for k, v in x.items()}
        if isinstance(x, list):
            return [fill(v) for v in x]
        if isinstance(x, str) and x.startswith("$"):
            if x[1:] not in values:
                sys.exit(f"run.py: scenario {spec['name']} uses {x} but "
                         f"declares no such parameter")
            return values[x[1:]]
        return x
    # "params" says what this run uses (--list shows it).
    return {**spec, "params": values, "steps": fill(spec["steps"])}


def load_scenarios(pattern: str, params: Dict[str, int] = None) \
        -> List[Dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "scenarios", "*.json"))):
        with open(path) as f:
            spec = json.load(f)
        name = os.path.splitext(os.path.basename(path))[0]
        if spec.get("name") != name:
            sys.exit(f"run.py: {path} names itself {spec.get('name')!r}; "
                     f"the name must be the file's")
        if fnmatch.fnmatch(name, pattern):
            out.append(with_params(spec, params or {}))
    return out


def main(argv: List[str]) -> int:
    opts = parse_args(argv)
    scenarios = load_scenarios(opts["scenario"], opts["param"])
    if not scenarios:
        print(f"run.py: no scenario matches {opts['scenario']!r}",
              file=sys.stderr)
        return 2
    declared = {k for s in scenarios for k in s.get("params", {})}
    if set(opts["param"]) - declared:
        print(f"run.py: no scenario run declares the parameter(s) "
              f"{sorted(set(opts['param']) - declared)}", file=sys.stderr)
        return 2
    if opts["list"]:
        for s in scenarios:
            params = ", ".join(f"{k}={v}" for k, v in
                               s.get("params", {}).items())
            print(f"{s['name']}: rules {', '.join(s['rules'])}"
                  + (f"; params {params}" if params else ""))
        return 0
    with open(os.path.join(HERE, "expected_failures.json")) as f:
        config = json.load(f)
    marks = config["expected_failures"].get(opts["client"] or "", {})
    skips = config.get("cannot_run", {}).get(opts["client"] or "", {})
    unknown = (set(marks) | set(skips)) - {
        s["name"] for s in load_scenarios("*")}
    if unknown:
        print(f"run.py: expected_failures.json names scenarios that do not "
              f"exist: {sorted(unknown)}", file=sys.stderr)
        return 2
    client = opts["client"] or "client"
    work = tempfile.mkdtemp(prefix="hilo-conformance.")
    Watchdog.start(work)
    try:
        return run_all(scenarios, opts, marks, skips, client, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_all(scenarios: List[Dict], opts: Dict, marks: Dict, skips: Dict,
            client: str, work: str) -> int:
    bad = 0
    start_all = time.monotonic()
    for spec in scenarios:
        if spec["name"] in skips:
            print(f"SKIP   {client}: {spec['name']}: "
                  f"{skips[spec['name']]['why']}")
            continue
        tmp = tempfile.mkdtemp(prefix=f"{spec['name']}.", dir=work)
        scenario = Scenario(spec, opts["server"], opts["driver"], tmp)
        start = time.monotonic()
        error = None
        skipped = None
        try:
            scenario.run()
        except Failure as e:
            error = str(e)
        except Skip as e:
            skipped = str(e)
        except Exception as e:  # a runner or scenario bug: say so, go on
            error = f"runner error: {type(e).__name__}: {e}"
        finally:
            try:
                scenario.close()
            except Exception as e:
                error = error or f"cleanup: {type(e).__name__}: {e}"
            shutil.rmtree(tmp, ignore_errors=True)
        took = time.monotonic() - start
        mark = marks.get(spec["name"])
        name = f"{client}: {spec['name']}"
        if skipped is not None and error is None:
            print(f"SKIP   {name}: {skipped}")
        elif error is None and mark is None:
            print(f"PASS   {name} ({took:.1f} s)")
        elif error is not None and mark is not None:
            print(f"XFAIL  {name} ({took:.1f} s): {error}\n"
                  f"       expected: {mark['why']}")
        elif error is None:
            bad += 1
            print(f"XPASS  {name} ({took:.1f} s): passes, but "
                  f"expected_failures.json says it fails ({mark['why']}); "
                  f"remove the mark")
        else:
            bad += 1
            print(f"FAIL   {name} ({took:.1f} s): {error}")
        for note in scenario.notes:
            print(f"       {note}")
        sys.stdout.flush()
    print(f"{client}: {len(scenarios)} scenarios, {bad} unexpected "
          f"result(s), {time.monotonic() - start_all:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
