#!/usr/bin/python3
"""check_test_file_size.py must refuse a test file over its limit, whatever
the language, and pass a tree whose test files are within it.

Each case writes a small tree into a temporary directory and runs the check
on it as ctest does: the clean tree passes; each planted long file makes it
exit 1 naming that file and its lines; files the check must not read (build
trees, node_modules, a long source that is not a test) leave it passing.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "testing"))
from check_fixture import run_check, write_tree  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "check_test_file_size.py")
LIMIT = 1200


def lines(n):
    return "".join(f"line {i}\n" for i in range(n))


# A tree whose test files are all within the limit, one at it exactly.
CLEAN = {
    "tests/store_test.cc": lines(LIMIT),
    "tests/abuse/abuse_lib.py": lines(10),
    "testing/server_process.h": lines(10),
    "clients/python/tests/test_client.py": lines(10),
    "clients/go/client_test.go": lines(10),
    "clients/java/src/test/java/io/hilo/client/HiloClientTest.java": lines(10),
    "clients/node/test/server.test.mjs": lines(10),
    # Long, but not test files: not this check's business.
    "service/server.cc": lines(LIMIT + 500),
    "tests/abuse/figures.json": lines(LIMIT + 500),
}

# Each: one long test file, found by its name or by its folder.
PLANTED = {
    "cpp_by_name": "tests/client_test.cc",
    "cpp_header_by_name": "fuzz/store_under_test.h",
    "python_test_prefix": "clients/python/tests/test_returns.py",
    "python_test_suffix": "tests/abuse/transport_abuse_test.py",
    "python_helper_in_tests": "tests/abuse/abuse_lib.py",
    "header_in_testing": "testing/fake_node.h",
    "go_by_name": "clients/go/real_server_test.go",
    "java_under_src_test": "clients/java/src/test/java/io/hilo/client/Fake.java",
    "typescript_by_name": "clients/node/src/cache.test.ts",
    "node_helper_in_test": "clients/node/test/helpers.mjs",
    "shell_by_name": "tests/postgres/fleet_test.sh",
}

# Long test files where the check must not look.
NOT_READ = {
    "build/release/tests/gen_test.cc": lines(LIMIT + 1),
    "build-asan/x_test.cc": lines(LIMIT + 1),
    "out/CMakeCache.txt": "",
    "out/tests/gen_test.cc": lines(LIMIT + 1),
    "clients/node/node_modules/dep/index.test.js": lines(LIMIT + 1),
    ".git/hooks/pre_test.sh": lines(LIMIT + 1),
}


def run_checker(root, *flags):
    return run_check(CHECKER, root, *flags)


class CheckTestFileSizeTest(unittest.TestCase):

    def test_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, CLEAN)
            result = run_checker(root)
            self.assertEqual(result.returncode, 0, result.stdout)
            self.assertIn("7 test files checked, none over 1200 lines "
                          "(the longest: tests/store_test.cc, 1200)",
                          result.stdout)

    def test_empty_tree_fails(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, {"service/server.cc": lines(3)})
            result = run_checker(root)
            self.assertEqual(result.returncode, 1)
            self.assertIn("no test files found", result.stderr)

    def test_each_planted_long_file_fails(self):
        for name, relpath in PLANTED.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as root:
                write_tree(root, {**CLEAN, relpath: lines(LIMIT + 1)})
                result = run_checker(root)
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertEqual(
                    result.stdout,
                    f"{relpath}: {LIMIT + 1} lines; a test file has at most "
                    f"{LIMIT}: split it into files named for the units it "
                    f"tests\n")

    def test_build_trees_and_dependencies_are_not_read(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, {**CLEAN, **NOT_READ})
            result = run_checker(root)
            self.assertEqual(result.returncode, 0, result.stdout)
            self.assertIn("7 test files checked", result.stdout)

    def test_limit_can_be_lowered(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, CLEAN)
            result = run_checker(root, "--max_lines=1199")
            self.assertEqual(result.returncode, 1, result.stdout)
            self.assertIn("tests/store_test.cc: 1200 lines; a test file has "
                          "at most 1199", result.stdout)


if __name__ == "__main__":
    unittest.main()
