#!/usr/bin/python3
"""Holds every test file to at most 1,200 lines, so that a unit's tests stay
a file a reader can find by its name and read through.

A test file is a source file that is a test by its name or by its folder:
  by name     *_test.cc, *_test.h, *_test.py, test_*.py, *_test.go,
              *Test.java, *.test.ts, *.test.mjs, *.test.js, *_test.sh,
              *_test.mjs, *.test.yaml
  by folder   any source (.cc .h .py .go .java .ts .mjs .js .sh) under a
              folder named tests/, testing/, test/ or __tests__/
Build trees, node_modules/, .git/ and __pycache__/ are not read.

Usage: check_test_file_size.py [--max_lines=N] SOURCE_ROOT
Prints one line per test file over the limit (its path, its lines, the
limit, and what to do) and exits 1 if there is any; else prints how many
test files it read and the longest, and exits 0. It exits 1 too when it
finds no test file at all (a wrong root must not pass).
check_test_file_size_test.py plants a long file in a small tree and expects
it to be refused.
"""
import fnmatch
import os
import sys

MAX_LINES = 1200
BY_NAME = ("*_test.cc", "*_test.h", "*_test.py", "test_*.py", "*_test.go",
           "*Test.java", "*.test.ts", "*.test.mjs", "*.test.js", "*_test.sh",
           "*_test.mjs", "*.test.yaml")
SOURCE = (".cc", ".h", ".py", ".go", ".java", ".ts", ".mjs", ".js", ".sh")
TEST_FOLDERS = {"tests", "testing", "test", "__tests__"}
NOT_READ = {".git", "node_modules", "__pycache__"}


def is_build_tree(dirpath, dirs, files):
    return "CMakeCache.txt" in files


def is_test_file(relpath):
    name = os.path.basename(relpath)
    if any(fnmatch.fnmatchcase(name, p) for p in BY_NAME):
        return True
    folders = relpath.split("/")[:-1]
    return name.endswith(SOURCE) and any(f in TEST_FOLDERS for f in folders)


def test_files(root):
    """(relative path, line count) of every test file under root."""
    found = []
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirs[:] = sorted(d for d in dirs if d not in NOT_READ and not (
            rel_dir == "." and d.startswith("build")))
        if is_build_tree(dirpath, dirs, files):
            dirs[:] = []
            continue
        for name in sorted(files):
            relpath = os.path.normpath(os.path.join(rel_dir, name))
            if not is_test_file(relpath):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                found.append((relpath, sum(1 for _ in f)))
    return found


def main(argv):
    limit = MAX_LINES
    args = []
    for a in argv[1:]:
        if a.startswith("--max_lines="):
            limit = int(a.split("=", 1)[1])
        else:
            args.append(a)
    if len(args) != 1:
        print(f"usage: {argv[0]} [--max_lines=N] SOURCE_ROOT", file=sys.stderr)
        return 2
    found = test_files(args[0])
    if not found:
        print(f"{args[0]}: no test files found", file=sys.stderr)
        return 1
    over = [(path, n) for path, n in found if n > limit]
    for path, n in over:
        print(f"{path}: {n} lines; a test file has at most {limit}: split it "
              f"into files named for the units it tests")
    if over:
        return 1
    path, n = max(found, key=lambda f: f[1])
    print(f"{len(found)} test files checked, none over {limit} lines "
          f"(the longest: {path}, {n})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
