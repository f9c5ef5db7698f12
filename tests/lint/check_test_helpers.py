#!/usr/bin/python3
"""Holds test tools to their homes: what tests share with anything else
lives in testing/, and production code uses neither testing/ nor a test
folder.

The places:
  test folder  a folder named tests/, test/ or __tests__/ (any depth: tests/,
               clients/java/src/test, clients/node/test,
               clients/python/tests), and the conformance suite,
               clients/conformance/. What is in one is the tests' own: used
               only by test code (a test folder, a test file by its name as
               check_test_file_size.py reads names, or a test runner,
               run_tests.sh or test.sh).
  testing/     what tests share with benchmarks, fuzzers, stress runs,
               examples and scripts: any of them may use it.
  production   base/, proto/, service/, client_cpp/, cli/, deploy/,
               packaging/, and clients/<language>/ outside its test folders
               and bench/: uses neither of the two above.
  (Go keeps its tests' helpers in _test.go files beside the code, which
  nothing else can import: that is Go's test folder.)

What is a use: a Python, TypeScript/JavaScript, Java or Go import and a
shell `.`/`source` (read as check_import_circles.py reads them), a C++
`#include "..."`, and a shell script naming a file of the tree to run
(`"$ROOT/tests/x/with_server.sh" ...`, outside comments). CMake files,
presets and docs are not read: they wire tests up, they do not use them.

Usage: check_test_helpers.py [--known=USER,USED]... SOURCE_ROOT
Prints one line per use out of place (the user, what it uses, and where
that belongs) and exits 1 if there is any; else prints how many uses it
read and exits 0 (1 when it reads none: a wrong root must not pass). A
--known admits one use for now (tests/CMakeLists.txt gives its reason):
reported, not counted, and an error once the use is gone.
check_test_helpers_test.py plants each kind of misplaced use in a small tree
and expects it to be refused.
"""
import os
import re
import sys

import check_import_circles as imports
import check_test_file_size

TEST_FOLDERS = {"tests", "test", "__tests__"}
TEST_SUITES = ("clients/conformance/",)
TEST_RUNNERS = {"run_tests.sh", "test.sh"}
PRODUCTION = ("base/", "proto/", "service/", "client_cpp/", "cli/",
              "deploy/", "packaging/")
PATH_TOKEN = re.compile(r"[\w.$/{}()\"'-]*/[\w.-]+")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CPP = (".cc", ".h", ".cpp", ".hpp")


def in_test_folder(path):
    return path.startswith(TEST_SUITES) or any(
        part in TEST_FOLDERS for part in path.split("/")[:-1])


def is_test(path):
    """Whether path is test code: in a test folder, a test by its name, or
    a test runner."""
    return in_test_folder(path) or os.path.basename(path) in TEST_RUNNERS \
        or check_test_file_size.is_test_file(path)


def is_production(path):
    if is_test(path) or path.startswith("testing/"):
        return False
    if path.startswith(PRODUCTION):
        return True
    parts = path.split("/")
    return len(parts) > 2 and parts[0] == "clients" and "bench" not in parts


def shell_runs(root, path, text):
    """Files of the tree a shell script names outside its comments."""
    here = os.path.dirname(path)
    used = set()
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for m in PATH_TOKEN.finditer(line):
            tail = imports.literal_tail(m.group())
            if not tail:
                continue
            found = imports.existing(root, os.path.join(here, tail), tail)
            if found and found != path:
                used.add(found)
    return used


def uses(root):
    """{(user, used)} over the tree, every language's imports and runs."""
    found = set()
    for lang, graph in imports.read_graph(root).items():
        if lang == "Go":
            continue  # packages, never a test folder's file
        for user, targets in graph.items():
            found.update((user, t) for t in targets)
    for path in imports.tree_files(root):
        if not path.endswith(CPP + (".sh",)):
            continue
        with open(os.path.join(root, path), encoding="utf-8",
                  errors="replace") as f:
            text = f.read()
        if path.endswith(".sh"):
            found.update((path, u) for u in shell_runs(root, path, text))
        else:
            for m in INCLUDE.finditer(text):
                target = imports.existing(root, m.group(1))
                if target:
                    found.add((path, target))
    return found


def verdict(user, used):
    """Why user may not use used, or None."""
    if in_test_folder(used) and not is_test(user):
        return ("which is in a test folder, for tests only: move what "
                "others share to testing/")
    if is_production(user) and used.startswith("testing/"):
        return "a test tool: production code never uses testing/"
    return None


def main(argv):
    known, args = {}, []
    for a in argv[1:]:
        if a.startswith("--known="):
            user, used = a.split("=", 1)[1].split(",")
            known[(user, used)] = False
        else:
            args.append(a)
    if len(args) != 1:
        print(f"usage: {argv[0]} [--known=USER,USED]... SOURCE_ROOT",
              file=sys.stderr)
        return 2
    found = uses(args[0])
    errors = []
    for user, used in sorted(found):
        why = verdict(user, used)
        if why is None:
            continue
        if (user, used) in known:
            known[(user, used)] = True
            print(f"{user}: uses {used}, known for now")
        else:
            errors.append(f"{user}: uses {used}, {why}")
    for (user, used), seen in sorted(known.items()):
        if not seen:
            errors.append(f"{user}: --known={user},{used} is no longer "
                          f"needed (the use is gone or in place): remove it")
    for e in errors:
        print(e)
    if errors:
        return 1
    if not found:
        print(f"{args[0]}: no use between the tree's files found",
              file=sys.stderr)
        return 1
    print(f"{len(found)} uses between the tree's files checked: test "
          f"folders are used by tests only, testing/ by no production code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
