#!/usr/bin/python3
"""Runs every shell transcript in the docs and compares its output.

A transcript is a fenced block tagged `console`: lines starting with "$ " are
commands, the lines after each are what it prints (stdout and stderr). Each
block runs in a fresh temporary folder against a fresh hilo_server started
for it (127.0.0.1:0, its own SQLite file), with `hilo` on PATH talking to
that server. Before running, a command's program paths build/*/cli/hilo
become `hilo`, and 127.0.0.1:50051 and 127.0.0.1:9464 (the defaults the docs
show) become the server's ports; in its output the server's ports become
those defaults again. Then each line must equal the documented one, except:
  - any RFC 3339 time matches any other;
  - a documented line ending in "..." matches any line that starts with the
    part before it.
A block elsewhere (untagged or `sh`) whose lines start with "$ hilo" is an
error: a transcript must be tagged `console` so that it is run.

  transcripts_test.py --server HILO_SERVER --cli HILO_CLI FILE...
  transcripts_test.py --server HILO_SERVER --cli HILO_CLI --root SOURCE_DIR

With --root, the files are every Markdown file of the repository outside
build/ and node_modules/.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
START = re.compile(r" on port (\d+) .*metrics port (\d+)")


def blocks(path):
    """(tag, first line number, lines) of each fenced block in `path`."""
    found, tag, start, body = [], None, 0, []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if m and tag is None:
                tag, start, body = m.group(1), number + 1, []
            elif line.startswith("```") and tag is not None:
                found.append((tag, start, body))
                tag = None
            elif tag is not None:
                body.append(line)
    return found


def steps(lines):
    """[(command, [expected lines])] of a console block."""
    out = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


class Server:
    def __init__(self, binary, folder):
        self.process = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
             f"--db={folder}/server/hilo.db", "--create_db", "--sync=normal"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = self.process.stderr.readline()
        m = START.search(line)
        if not m:
            self.process.kill()
            raise SystemExit(f"hilo_server did not start: {line!r}")
        self.port, self.metrics_port = m.group(1), m.group(2)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def matches(expected, actual):
    expected, actual = TIME.sub("<TIME>", expected), TIME.sub("<TIME>", actual)
    if expected.endswith("..."):
        return actual.startswith(expected[:-3])
    return expected == actual


def run_block(args, where, lines):
    problems = []
    folder = tempfile.mkdtemp(prefix="hilo-transcript-")
    server = None
    try:
        server = Server(args.server, folder)
        bin_dir = os.path.join(folder, "bin")
        os.mkdir(bin_dir)
        wrapper = os.path.join(bin_dir, "hilo")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexec "{args.cli}" '
                    f'--target=127.0.0.1:{server.port} "$@"\n')
        os.chmod(wrapper, 0o755)
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        for command, expected in steps(lines):
            runnable = re.sub(r"(?<![\w/])build/\w+/cli/hilo\b", "hilo",
                              command)
            runnable = runnable.replace("127.0.0.1:50051",
                                        f"127.0.0.1:{server.port}")
            runnable = runnable.replace("127.0.0.1:9464",
                                        f"127.0.0.1:{server.metrics_port}")
            done = subprocess.run(["sh", "-c", runnable], cwd=folder, env=env,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  timeout=60, check=False)
            actual = done.stdout.replace(f"127.0.0.1:{server.port}",
                                         "127.0.0.1:50051")
            actual = actual.replace(f"127.0.0.1:{server.metrics_port}",
                                    "127.0.0.1:9464")
            actual = actual.rstrip("\n").split("\n") if actual else []
            if len(actual) != len(expected) or not all(
                    matches(e, a) for e, a in zip(expected, actual)):
                problems.append(
                    f"{where}: $ {command}\n  documented:\n"
                    + "".join(f"    {l}\n" for l in expected)
                    + "  printed:\n" + "".join(f"    {l}\n" for l in actual))
    finally:
        if server:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--root")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.root:
        for dirpath, dirs, files in os.walk(args.root):
            dirs[:] = sorted(d for d in dirs if d not in
                             ("build", "node_modules", ".git"))
            args.files += [os.path.join(dirpath, f) for f in sorted(files)
                           if f.endswith(".md")]
    if not args.files:
        parser.error("no files: give FILE... or --root")
    problems, ran = [], 0
    for path in args.files:
        for tag, start, lines in blocks(path):
            where = f"{path}:{start}"
            if tag == "console":
                problems += run_block(args, where, lines)
                ran += 1
            elif any(l.startswith("$ hilo") for l in lines):
                problems.append(f"{where}: a transcript of hilo in a block "
                                f"tagged '{tag}'; tag it 'console' so that "
                                f"it is run")
    for p in problems:
        print("FAIL:", p)
    if ran == 0:
        print("FAIL: no console transcript found")
        return 1
    print(f"{ran} transcripts run, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
