#!/usr/bin/python3
"""check_import_circles.py must refuse an import circle planted in each
language it reads (Python, TypeScript, Java, Go, shell), however the
imports are spelled, and pass a tree whose imports only go one way.

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
                       "check_import_circles.py")

JAVA_MAIN = "clients/java/src/main/java/io/hilo/client/"
JAVA_TEST = "clients/java/src/test/java/io/hilo/client/"

# Imports that only go one way, and names that look like arrows but are not
# (a class named in a comment or a string, a library's module).
CLEAN = {
    "clients/python/hilo_client/__init__.py":
        "from hilo_client.client import Client\n",
    "clients/python/hilo_client/client.py":
        "import os\nfrom . import _cache\nfrom ._values import Id\n",
    "clients/python/hilo_client/_cache.py":
        "from hilo_client._values import Id\n",
    "clients/python/hilo_client/_values.py": "import grpc\nId = int\n",
    "tests/abuse/abuse_lib.py": "import subprocess\n",
    "tests/abuse/flood_test.py": "import abuse_lib\n",
    "clients/node/src/client.ts":
        "import { RangeCache } from './range_cache.js';\n"
        "import type { Id } from './types.js';\n",
    "clients/node/src/range_cache.ts":
        "import type { Id } from './types.js';\n"
        "import * as grpc from '@grpc/grpc-js';\n"
        "// import { HiloClient } from './client.js';\n",
    "clients/node/src/types.ts": "export type Id = bigint;\n",
    JAVA_MAIN + "HiloClient.java":
        "package io.hilo.client;\n\nimport java.util.List;\n\n"
        "public final class HiloClient {\n  private RangeCache cache;\n}\n",
    JAVA_MAIN + "RangeCache.java":
        "package io.hilo.client;\n\n"
        "/** Never calls HiloClient back. */\n"
        "final class RangeCache {\n"
        "  String s = \"HiloClient\";\n"
        "  RangeFetcher fetcher;\n}\n",
    JAVA_MAIN + "RangeFetcher.java":
        "package io.hilo.client;\n\ninterface RangeFetcher {}\n",
    JAVA_TEST + "HiloClientTest.java":
        "package io.hilo.client;\n\n"
        "class HiloClientTest {\n  HiloClient c;\n}\n",
    "clients/go/go.mod": "module example.com/hilo\n\ngo 1.19\n",
    "clients/go/client.go":
        "package hilo\n\nimport (\n\t\"context\"\n\n"
        "\t\"example.com/hilo/internal/held\"\n)\n",
    "clients/go/internal/held/held.go": "package held\n\nimport \"sort\"\n",
    "examples/go/draw/main.go":
        "package main\n\nimport hilo \"example.com/hilo\"\n",
    "scripts/lib.sh": "say() { echo \"$1\"; }\n",
    "scripts/run.sh":
        "#!/bin/sh\nROOT=$(dirname \"$0\")/..\n"
        "# shellcheck source=scripts/lib.sh\n. \"$ROOT/scripts/lib.sh\"\n",
}

# Each: files added to CLEAN that close a circle, and the circle the check
# must name.
PLANTED = {
    "python_relative": (
        {"clients/python/hilo_client/_values.py":
         "from . import client\nId = int\n"},
        "Python import circle: clients/python/hilo_client/_cache.py -> "
        "clients/python/hilo_client/_values.py -> "
        "clients/python/hilo_client/client.py -> "
        "clients/python/hilo_client/_cache.py"),
    "python_absolute_through_the_package": (
        {"clients/python/hilo_client/_cache.py":
         "from hilo_client import Client\n"},
        "Python import circle: clients/python/hilo_client/__init__.py -> "
        "clients/python/hilo_client/client.py -> "
        "clients/python/hilo_client/_cache.py -> "
        "clients/python/hilo_client/__init__.py"),
    "python_import_inside_a_function": (
        {"tests/abuse/abuse_lib.py":
         "def run():\n    import flood_test\n    return flood_test\n"},
        "Python import circle: tests/abuse/abuse_lib.py -> "
        "tests/abuse/flood_test.py -> tests/abuse/abuse_lib.py"),
    "typescript_type_only": (
        {"clients/node/src/types.ts":
         "import type { HiloClient } from './client.js';\n"
         "export type Id = bigint;\n"},
        "TypeScript import circle: clients/node/src/client.ts -> "
        "clients/node/src/types.ts -> clients/node/src/client.ts"),
    "typescript_export_from_and_dynamic_import": (
        {"clients/node/src/range_cache.ts":
         "export { x } from './types.js';\n"
         "const m = await import('./client.js');\n"},
        "TypeScript import circle: clients/node/src/client.ts -> "
        "clients/node/src/range_cache.ts -> clients/node/src/client.ts"),
    "javascript_require": (
        {"clients/node/scripts/a.cjs": "const b = require('./b');\n",
         "clients/node/scripts/b.cjs": "const a = require('./a.cjs');\n"},
        "TypeScript import circle: clients/node/scripts/a.cjs -> "
        "clients/node/scripts/b.cjs -> clients/node/scripts/a.cjs"),
    "java_class_calls_back": (
        {JAVA_MAIN + "RangeCache.java":
         "package io.hilo.client;\n\nfinal class RangeCache {\n"
         "  private final HiloClient owner;\n}\n"},
        "Java import circle: " + JAVA_MAIN + "HiloClient.java -> " +
        JAVA_MAIN + "RangeCache.java -> " + JAVA_MAIN + "HiloClient.java"),
    "java_main_reaches_test_class": (
        {JAVA_MAIN + "RangeFetcher.java":
         "package io.hilo.client;\n\n"
         "interface RangeFetcher { HiloClientTest t(); }\n"},
        "Java import circle: " + JAVA_MAIN + "HiloClient.java -> " +
        JAVA_MAIN + "RangeCache.java -> " + JAVA_MAIN + "RangeFetcher.java "
        "-> " + JAVA_TEST + "HiloClientTest.java -> " + JAVA_MAIN +
        "HiloClient.java"),
    "java_import_across_packages": (
        {"examples/java/a/A.java":
         "package ex.a;\n\nimport ex.b.B;\n\nclass A {}\n",
         "examples/java/b/B.java":
         "package ex.b;\n\nimport static ex.a.A.run;\n\nclass B {}\n"},
        "Java import circle: examples/java/a/A.java -> "
        "examples/java/b/B.java -> examples/java/a/A.java"),
    "go_packages": (
        {"clients/go/internal/held/held.go":
         "package held\n\nimport (\n\t\"sort\"\n\n"
         "\thilo \"example.com/hilo\"\n)\n"},
        "Go import circle: clients/go/ -> clients/go/internal/held/ -> "
        "clients/go/"),
    "shell_sourcing": (
        {"scripts/lib.sh":
         "say() { echo; }\n. \"$(dirname \"$0\")/run.sh\"\n"},
        "shell import circle: scripts/lib.sh -> scripts/run.sh -> "
        "scripts/lib.sh"),
}

ADVICE = (": give one side a narrow interface of its own, or move what both "
          "need below them\n")


class CheckImportCirclesTest(unittest.TestCase):

    def test_clean_tree_passes(self):
        result = run_on_tree(CHECKER, CLEAN)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(
            result.stdout,
            "no import circle (Go 3 files, 2 arrows; Java 4 files, 3 arrows; "
            "Python 6 files, 5 arrows; TypeScript 3 files, 3 arrows; shell 2 "
            "files, 1 arrows)\n")

    def test_each_planted_circle_fails(self):
        for name, (files, circle) in PLANTED.items():
            with self.subTest(name):
                result = run_on_tree(CHECKER, {**CLEAN, **files})
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertEqual(result.stdout, circle + ADVICE)

    def test_tree_without_imports_fails(self):
        result = run_on_tree(CHECKER, {"service/a.py": "import os\n"})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("no import between the tree's own files found",
                      result.stderr)


if __name__ == "__main__":
    unittest.main()
