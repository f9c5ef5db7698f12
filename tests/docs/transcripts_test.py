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

For the programs a transcript runs, a block tagged with a language and a
file name (```python app.py, ```xml ~/.m2/settings.xml) is a file: it is
written, with the same port substitution, into the folder of the next
transcript of its Markdown file (a name starting with ~/ into that
transcript's home). Each transcript's folder holds the checkout as hilo/ (a
link to --checkout, by default --root), and HOME is a fresh folder of its
own (for Java, MAVEN_OPTS=-Duser.home too, since Java reads the home from
the password file; npm keeps the caller's ~/.npmrc and ~/.npm, its
settings and the cache clients/node installs from, offline); terminal
colour codes are dropped from the output.

  transcripts_test.py --server HILO_SERVER --cli HILO_CLI FILE...
  transcripts_test.py --server HILO_SERVER --cli HILO_CLI --root SOURCE_DIR
      [--skip FILE]...
  options: --section HEADING  only the transcripts under "## HEADING"
           --command-timeout S  each command's bound (default 60)

With --root, the files are every Markdown file of the repository outside
build/ and node_modules/, but those given with --skip (relative to --root).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)(?:\s+(\S+))?\s*$")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
START = re.compile(r" on port (\d+) .*metrics port (\d+)")


def blocks(path):
    """(tag, file name or None, first line number, lines, section) of each
    fenced block in `path`; section is the "## " heading above it."""
    found, tag, name, start, body, section = [], None, None, 0, [], ""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if m and tag is None:
                tag, name, start, body = m.group(1), m.group(2), number + 1, []
            elif line.startswith("```") and tag is not None:
                found.append((tag, name, start, body, section))
                tag = None
            elif tag is not None:
                body.append(line)
            elif line.startswith("## "):
                section = line[3:].strip()
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


def run_block(args, where, lines, files=()):
    problems = []
    work = tempfile.mkdtemp(prefix="hilo-transcript-")
    folder = os.path.join(work, "run")  # what the commands see
    home = os.path.join(work, "home")
    os.mkdir(folder)
    os.mkdir(home)
    server = None
    try:
        server = Server(args.server, work)
        bin_dir = os.path.join(work, "bin")
        os.mkdir(bin_dir)
        wrapper = os.path.join(bin_dir, "hilo")
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexec "{args.cli}" '
                    f'--target=127.0.0.1:{server.port} "$@"\n')
        os.chmod(wrapper, 0o755)
        if args.checkout:
            os.symlink(os.path.abspath(args.checkout),
                       os.path.join(folder, "hilo"))
        for name, text in files:
            path = (os.path.join(home, name[2:]) if name.startswith("~/")
                    else os.path.join(folder, name))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace("127.0.0.1:50051",
                                     f"127.0.0.1:{server.port}"))
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
                   HOME=home, MAVEN_OPTS=f"-Duser.home={home}")
        # npm's settings and cache stay the caller's: clients/node installs
        # its packages from that cache, offline.
        for name, variable in ((".npmrc", "NPM_CONFIG_USERCONFIG"),
                               (".npm", "NPM_CONFIG_CACHE")):
            path = os.path.expanduser("~/" + name)
            if os.path.exists(path) and variable not in env:
                env[variable] = path
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
                                  timeout=args.command_timeout, check=False)
            actual = COLOUR.sub("", done.stdout).replace(f"127.0.0.1:{server.port}",
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
        shutil.rmtree(work, ignore_errors=True)
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--root")
    parser.add_argument("--checkout")
    parser.add_argument("--skip", action="append", default=[])
    parser.add_argument("--section")
    parser.add_argument("--command-timeout", type=float, default=60)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    args.checkout = args.checkout or args.root
    if args.root:
        skip = {os.path.normpath(os.path.join(args.root, s))
                for s in args.skip}
        for dirpath, dirs, files in os.walk(args.root):
            dirs[:] = sorted(d for d in dirs if d not in
                             ("build", "node_modules", ".git"))
            args.files += [os.path.join(dirpath, f) for f in sorted(files)
                           if f.endswith(".md") and
                           os.path.normpath(os.path.join(dirpath, f))
                           not in skip]
    if not args.files:
        parser.error("no files: give FILE... or --root")
    problems, ran = [], 0
    for path in args.files:
        files = []
        for tag, name, start, lines, section in blocks(path):
            where = f"{path}:{start}"
            if args.section is not None and section != args.section:
                continue
            if name is not None:
                files.append((name, "\n".join(lines) + "\n"))
            elif tag == "console":
                problems += run_block(args, where, lines, files)
                files = []
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
