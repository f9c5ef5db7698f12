#!/usr/bin/python3
"""check_test_helpers.py must refuse a test folder's file used by anything
but tests, and testing/ used by production code, in each language it reads,
and pass a tree where test tools stay in their homes.

Each case writes a small tree into a temporary directory and runs the check
on it as ctest does.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "testing"))
from check_fixture import run_on_tree  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "check_test_helpers.py")

JAVA_MAIN = "clients/java/src/main/java/io/hilo/client/"
JAVA_TEST = "clients/java/src/test/java/io/hilo/client/"

# Uses in place, and a path that is named but not used (a comment).
CLEAN = {
    "testing/with_server.sh": "#!/bin/sh\nexec \"$@\"\n",
    "testing/fake_node.h": "#pragma once\n",
    "bench/run.sh":
        "#!/bin/sh\nROOT=$(dirname \"$0\")/..\n"
        "# tests/lib.sh is for tests only\n"
        "\"$ROOT/testing/with_server.sh\" ./bench\n",
    "tests/lib.sh": "say() { echo \"$1\"; }\n",
    "tests/a_test.sh": "#!/bin/sh\n. \"$(dirname \"$0\")/lib.sh\"\n",
    "tests/a_test.cc":
        "#include \"testing/fake_node.h\"\n#include \"service/x.h\"\n",
    "service/x.h": "#pragma once\n",
    "service/x.cc": "#include \"service/x.h\"\n",
    "clients/python/hilo_client/__init__.py": "from . import client\n",
    "clients/python/hilo_client/client.py": "import os\n",
    "clients/python/tests/fixtures.py": "import os\n",
    "clients/python/tests/test_client.py": "import fixtures\n",
    "clients/go/run_tests.sh":
        "#!/bin/sh\n\"$ROOT/clients/conformance/drivers/go/build.sh\" out\n",
    "clients/conformance/drivers/go/build.sh": "#!/bin/sh\n",
    JAVA_MAIN + "HiloClient.java":
        "package io.hilo.client;\n\npublic final class HiloClient {}\n",
    JAVA_TEST + "FakeHilo.java":
        "package io.hilo.client;\n\nfinal class FakeHilo {\n"
        "  HiloClient client;\n}\n",
    "clients/node/src/client.ts": "import { x } from './types.js';\n",
    "clients/node/src/types.ts": "export const x = 1;\n",
    "clients/node/test/helpers.mjs": "export const y = 1;\n",
    "clients/node/test/client.test.mjs":
        "import { y } from './helpers.mjs';\n",
}

# Each: files added to CLEAN, and the line the check must print.
PLANTED = {
    "bench_runs_a_test_folder_script": (
        {"bench/run.sh": "#!/bin/sh\n\"$ROOT/tests/lib.sh\" ./bench\n"},
        "bench/run.sh: uses tests/lib.sh, which is in a test folder"),
    "example_sources_the_conformance_suite": (
        {"examples/java/build.sh":
         "#!/bin/sh\n. \"$ROOT/clients/conformance/drivers/go/build.sh\"\n"},
        "examples/java/build.sh: uses clients/conformance/drivers/go/"
        "build.sh, which is in a test folder"),
    "server_includes_testing": (
        {"service/x.cc": "#include \"testing/fake_node.h\"\n"},
        "service/x.cc: uses testing/fake_node.h, a test tool"),
    "client_includes_a_test_folder": (
        {"client_cpp/src/a.cc": "#include \"tests/a_test.cc\"\n"},
        "client_cpp/src/a.cc: uses tests/a_test.cc, which is in a test "
        "folder"),
    "python_client_imports_its_tests": (
        {"clients/python/hilo_client/client.py":
         "from tests import fixtures\n"},
        "clients/python/hilo_client/client.py: uses clients/python/tests/"
        "fixtures.py, which is in a test folder"),
    "java_main_names_a_test_class": (
        {JAVA_MAIN + "HiloClient.java":
         "package io.hilo.client;\n\npublic final class HiloClient {\n"
         "  static FakeHilo fake;\n}\n"},
        "clients/java/src/main/java/io/hilo/client/HiloClient.java: uses "
        "clients/java/src/test/java/io/hilo/client/FakeHilo.java, which is "
        "in a test folder"),
    "node_client_imports_testing": (
        {"clients/node/src/client.ts":
         "import { f } from '../../../testing/fake.js';\n",
         "testing/fake.ts": "export const f = 1;\n"},
        "clients/node/src/client.ts: uses testing/fake.ts, a test tool"),
    "node_client_imports_its_tests": (
        {"clients/node/src/client.ts":
         "import { y } from '../test/helpers.mjs';\n"},
        "clients/node/src/client.ts: uses clients/node/test/helpers.mjs, "
        "which is in a test folder"),
}


class CheckTestHelpersTest(unittest.TestCase):

    def test_clean_tree_passes(self):
        result = run_on_tree(CHECKER, CLEAN)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(
            result.stdout,
            "11 uses between the tree's files checked: test folders are used "
            "by tests only, testing/ by no production code\n")

    def test_each_planted_use_fails(self):
        for name, (files, line) in PLANTED.items():
            with self.subTest(name):
                result = run_on_tree(CHECKER, {**CLEAN, **files})
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertEqual(len(result.stdout.splitlines()), 1,
                                 result.stdout)
                self.assertTrue(result.stdout.startswith(line),
                                result.stdout)

    def test_known_use_passes_until_it_is_gone(self):
        tree = {**CLEAN, "bench/run.sh": "#!/bin/sh\n\"$ROOT/tests/lib.sh\"\n"}
        known = "--known=bench/run.sh,tests/lib.sh"
        result = run_on_tree(CHECKER, tree, known)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("bench/run.sh: uses tests/lib.sh, known for now",
                      result.stdout)
        result = run_on_tree(CHECKER, CLEAN, known)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("bench/run.sh: --known=bench/run.sh,tests/lib.sh is no "
                      "longer needed", result.stdout)

    def test_tree_without_uses_fails(self):
        result = run_on_tree(CHECKER, {"service/a.py": "import os\n"})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("no use between the tree's files found", result.stderr)


if __name__ == "__main__":
    unittest.main()
