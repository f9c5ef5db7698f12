#!/usr/bin/python3
"""Checks that the cheapest facts of the docs still match the tree.

  drift_test.py flags SOURCE_DIR HILO_SERVER
      docs/server.md's flag table lists exactly the flags `hilo_server --help`
      lists, each with the default --help prints ("off" for a switch, "none"
      for an empty value; a note in parentheses after it is ignored).
  drift_test.py layout SOURCE_DIR
      every path in README.md's layout table exists, and every top-level
      directory of the tree (git ls-files) has a row of its own.
  drift_test.py tracker SOURCE_DIR [--except PATH]...
      no Markdown file of the tree points at an issue tracker ("issue 24",
      "issue #3"): there is none in the repository, so the reader cannot
      follow it. Say what the issue said instead.
  drift_test.py labels SOURCE_DIR BUILD_DIR
      docs/testing.md's label table lists exactly the labels of BUILD_DIR's
      tests (ctest --print-labels).

Each prints what differs, one line each, and exits 1 if anything does.
"""
import os
import re
import subprocess
import sys

HELP_FLAG = re.compile(r"^  --(\w+)(?:=(.*?))?(?:  \(default: empty\))?$")
CODE = re.compile(r"`([^`]*)`")


def table_rows(text, heading=None, first_cell=None):
    """The cells of each row of the first Markdown table after `heading`."""
    lines = text.split("\n")
    if heading is not None:
        lines = lines[lines.index(heading):]
    rows, seen = [], False
    for line in lines:
        if line.startswith("|"):
            seen = True
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if set(cells[0]) <= set("- "):
                continue
            rows.append(cells)
        elif seen:
            break
    return rows[1:]  # without the header


def help_flags(server):
    done = subprocess.run([server, "--help"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30,
                          check=False)
    flags = {}
    for line in done.stdout.split("\n"):
        m = HELP_FLAG.match(line)
        if m:
            value = m.group(2)
            flags[m.group(1)] = "off" if value is None else (value or "none")
    if not flags:
        raise SystemExit(f"no flags found in {server} --help:\n{done.stdout}")
    return flags


def documented_default(cell):
    cell = re.sub(r"\s*\([^)]*\)", "", cell)  # notes: "4294967296 (2^32)"
    return [d.strip().strip("`") for d in cell.split(",")]


def check_flags(root, server):
    with open(os.path.join(root, "docs/server.md"), encoding="utf-8") as f:
        rows = table_rows(f.read())
    documented = {}
    for cells in rows:
        names = [n.lstrip("-") for n in CODE.findall(cells[0])]
        defaults = documented_default(cells[1])
        if len(defaults) == 1:
            defaults *= len(names)
        if len(defaults) != len(names):
            yield f"docs/server.md: row {cells[0]}: {len(names)} flags, " \
                  f"{len(defaults)} defaults"
            continue
        documented.update(zip(names, defaults))
    actual = help_flags(server)
    for name in sorted(set(actual) - set(documented)):
        yield f"docs/server.md: --{name} is in --help but not in the table"
    for name in sorted(set(documented) - set(actual)):
        yield f"docs/server.md: --{name} is in the table but not in --help"
    for name in sorted(set(actual) & set(documented)):
        if actual[name] != documented[name]:
            yield (f"docs/server.md: --{name}'s default is "
                   f"'{documented[name]}' in the table, '{actual[name]}' "
                   f"in --help")


def tracked(root):
    done = subprocess.run(["git", "-C", root, "ls-files"],
                          stdout=subprocess.PIPE, text=True, timeout=30,
                          check=True)
    return done.stdout.split("\n")[:-1]


def check_layout(root):
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        rows = table_rows(f.read(), heading="## Layout")
    covered = set()
    for cells in rows:
        folder = ""
        for path in CODE.findall(cells[0]):
            if "/" not in path.rstrip("/") and folder and \
                    not os.path.exists(os.path.join(root, path)):
                path = folder + path  # `service/server.cc`, `main.cc`
            if not os.path.exists(os.path.join(root, path)):
                yield f"README.md layout: {path} does not exist"
                continue
            folder = path if path.endswith("/") else os.path.dirname(path) + "/"
            covered.add(path.split("/")[0])
    tops = {p.split("/")[0] for p in tracked(root) if "/" in p}
    for top in sorted(tops - covered):
        yield f"README.md layout: {top}/ has no row"


TRACKER = re.compile(r"\b[Ii]ssues? #?\d+")


def check_tracker(root, exceptions):
    for path in tracked(root):
        if not path.endswith(".md") or path in exceptions:
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for m in TRACKER.finditer(line):
                    yield f"{path}:{number}: '{m.group(0)}' points at an " \
                          f"issue tracker the repository does not have"


def check_labels(root, build):
    with open(os.path.join(root, "docs/testing.md"), encoding="utf-8") as f:
        rows = table_rows(f.read())
    documented = {CODE.findall(cells[0])[0] for cells in rows}
    done = subprocess.run(["ctest", "--test-dir", build, "--print-labels"],
                          stdout=subprocess.PIPE, text=True, timeout=60,
                          check=True)
    actual = set()
    listing = False
    for line in done.stdout.split("\n"):
        if line.startswith("All Labels:"):
            listing = True
        elif listing and line.strip():
            actual.add(line.strip())
    if not actual:
        yield f"no labels in {build}"
    for label in sorted(actual - documented):
        yield f"docs/testing.md: label {label} is not in the table"
    for label in sorted(documented - actual):
        yield f"docs/testing.md: label {label} is in the table, no test has it"


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    what, root = argv[1], argv[2]
    if what == "flags" and len(argv) == 4:
        problems = list(check_flags(root, argv[3]))
    elif what == "layout" and len(argv) == 3:
        problems = list(check_layout(root))
    elif what == "tracker" and len(argv) % 2 == 1:
        exceptions = argv[4::2]
        if any(a != "--except" for a in argv[3::2]):
            print(__doc__, file=sys.stderr)
            return 2
        problems = list(check_tracker(root, exceptions))
    elif what == "labels" and len(argv) == 4:
        problems = list(check_labels(root, argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print("FAIL:", p)
    print(f"drift_test {what}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
