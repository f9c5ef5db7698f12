#!/usr/bin/python3
"""Several languages' clients at once on the same collections of two nodes,
under repeated kill -9 and SIGSTOP, every ID of all of them checked
together.

    draw_together.py --server PATH/TO/hilo_server --draw scripts/hilo-draw
                     --langs cpp,python [--seconds 4] [--threads 4]
                     [--build_timeout 600]

First builds each language's draw program (`hilo-draw LANG --build`: Go,
Node and Java's are compiled on first use), so that every draw starts at
once when the clock starts, whether or not the tests that build them ran
before. Then starts nodes A and B (their own stores, so the tag keeps their
numbers apart), and for each collection ("orders", "users") and each
language runs `hilo-draw LANG --targets=A,B --collection=C --threads=N
--seconds=S`, all at once, while each node in turn is killed with SIGKILL
and restarted on its port, or paused with SIGSTOP and resumed (kills and
pauses alternate). Each program's IDs are read slowly for as long as it
runs (its output blocks on a full pipe, so this bounds how many IDs a fast
client makes, even one that started late), then to the end. Passes when every program exited 0, printed
at least one ID, and all IDs together are well formed and none is there
twice.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from processes import FaultLoop, Node, Watchdog  # noqa: E402

COLLECTIONS = ("orders", "users")


def reader(proc, sink):
    """Collects proc's stdout, 4 KiB per 5 ms while proc runs: its draws
    are throttled for as long as they last, however late it started."""
    chunks = []
    fd = proc.stdout.fileno()
    while True:
        data = os.read(fd, 4096)
        if not data:
            break
        chunks.append(data)
        if proc.poll() is None:
            time.sleep(0.005)
    sink.append(b"".join(chunks))


def build_draw_programs(draw, langs, timeout):
    """hilo-draw LANG --build for each language, one after the other (their
    builds share the machine's cores): a list of failures, empty when every
    program is ready."""
    bad = []
    for lang in langs:
        start = time.monotonic()
        try:
            done = subprocess.run([draw, lang, "--build"],
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            bad.append(f"{lang}: its draw program did not build within "
                       f"{timeout:g} s")
            continue
        took = time.monotonic() - start
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip()
            bad.append(f"{lang}: its draw program did not build (exit "
                       f"{done.returncode}): {err[-1000:]}")
        else:
            print(f"{lang}: draw program ready ({took:.1f} s)", flush=True)
    return bad


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--draw", required=True)
    p.add_argument("--langs", required=True)
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--build_timeout", type=float, default=600)
    args = p.parse_args()
    langs = [x for x in args.langs.replace(";", ",").split(",") if x]
    bad = build_draw_programs(args.draw, langs, args.build_timeout)
    for b in bad:
        print(f"FAIL: {b}")
    if bad:
        return 1

    tmp = tempfile.mkdtemp(prefix="hilo-draw-together.")
    Watchdog.start(tmp)
    nodes, runs, faults = {}, [], None
    try:
        for name in ("A", "B"):
            nodes[name] = Node(args.server, tmp, name, name, [])
        targets = ",".join(n.address for n in nodes.values())
        for collection in COLLECTIONS:
            for lang in langs:
                proc = subprocess.Popen(
                    [args.draw, lang, f"--targets={targets}",
                     f"--collection={collection}",
                     f"--threads={args.threads}",
                     f"--seconds={args.seconds}"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
                Watchdog.record(proc.pid)
                sink = []
                t = threading.Thread(target=reader, args=(proc, sink))
                t.start()
                runs.append((lang, collection, proc, sink, t))
        faults = FaultLoop(nodes, {"nodes": ["A", "B"],
                                   "kind": "kill_and_stop",
                                   "down_ms": 300, "up_ms": 400})
        faults.start()
        time.sleep(args.seconds)
        faults.stop()
        rounds = faults.rounds
        faults = None

        seen = {}
        bad = []
        for lang, collection, proc, sink, t in runs:
            who = f"{lang} on {collection}"
            try:
                proc.wait(args.seconds + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                bad.append(f"{who}: still running {args.seconds + 60:g} s "
                           f"after its draws should have ended; killed")
            t.join(30)
            err = proc.stderr.read().decode(errors="replace").strip()
            if proc.returncode != 0:
                bad.append(f"{who}: exit status {proc.returncode}; stderr: "
                           f"{err[-1000:]}")
            lines = b"".join(sink).decode(errors="replace").splitlines()
            form = re.compile(re.escape(collection) +
                              r"/[1-9][0-9]*-[A-Z0-9]{1,4}")
            if not lines:
                bad.append(f"{who}: printed no ID")
            for line in lines:
                if not form.fullmatch(line):
                    bad.append(f"{who}: malformed ID {line!r}")
                    break
                if line in seen:
                    bad.append(f"{who}: ID {line} twice (also from "
                               f"{seen[line]})")
                    break
                seen[line] = who
            print(f"{who}: {len(lines)} IDs, exit {proc.returncode}")
        print(f"{len(seen)} IDs in all, {rounds} rounds of kill -9 and SIGSTOP")
        for b in bad:
            print(f"FAIL: {b}")
        return 1 if bad else 0
    finally:
        if faults:
            faults.stop()
        for lang, collection, proc, sink, t in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for n in nodes.values():
            n.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
