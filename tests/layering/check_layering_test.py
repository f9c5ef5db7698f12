#!/usr/bin/python3
"""check_layering.py must refuse each kind of violation it claims to catch.

Each case writes a small tree into a temporary directory (a clean base that
passes, plus one planted file), runs the checker on it as ctest does, and
expects exit status 1 and the refusal's words; the clean tree alone must pass.
A check that can no longer fail is a check that is gone.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "testing"))
from check_fixture import run_check, write_tree  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "check_layering.py")

# A tree that keeps every rule: each part includes only what is below it.
CLEAN = {
    "base/hilo/base/mutex.h": "#include <mutex>\n",
    "proto/hilo/v1/conversions.h": '#include "hilo/base/mutex.h"\n'
                                   '#include "grpcpp/support/status.h"\n',
    "service/store/range_store.h": '#include "absl/status/status.h"\n',
    "service/store/collection_rules.h":
        '#include "service/store/range_store.h"\n',
    "service/store/collection_rules.cc":
        '#include "service/store/collection_rules.h"\n',
    "service/store/sqlite/sqlite_range_store.h":
        '#include "service/store/range_store.h"\n#include <sqlite3.h>\n',
    "service/access/authorizer.h": '#include "service/store/range_store.h"\n',
    "service/rpc/hilo_service.h": '#include "hilo/v1/hilo.grpc.pb.h"\n'
                                  '#include "service/access/authorizer.h"\n',
    "service/server.h": '#include "service/rpc/hilo_service.h"\n'
                        '#include "service/store/sqlite/sqlite_range_store.h"\n',
    "client_cpp/include/hilo/client.h": '#include "hilo/v1/hilo.pb.h"\n',
    "cli/hilo.cc": '#include "hilo/client.h"\n',
    "testing/server_process.h": '#include "service/server.h"\n',
    "tests/end2end_test.cc": '#include "testing/server_process.h"\n'
                             '#include "hilo/client.h"\n',
}

# name -> (planted files, words the refusal must contain)
PLANTED = {
    "store_includes_grpc_in_angle_brackets": (
        {"service/store/group_commit.h": "#include <grpcpp/grpcpp.h>\n"},
        "the store knows nothing of gRPC"),
    "store_includes_grpc_in_quotes": (
        {"service/store/group_commit.h": '#include "grpcpp/grpcpp.h"\n'},
        "the store knows nothing of gRPC"),
    "store_includes_wire_messages": (
        {"service/store/group_commit.h": '#include "hilo/v1/hilo.pb.h"\n'},
        "the wire messages"),
    "store_includes_prometheus": (
        {"service/store/group_commit.h": "#include <prometheus/counter.h>\n"},
        "metrics"),
    "room_includes_room_above": (
        {"service/store/group_commit.h":
             '#include "service/access/authorizer.h"\n'},
        "room store includes service/access/authorizer.h"),
    "engine_includes_other_engine": (
        {"service/store/postgres/pg.h":
             '#include "service/store/sqlite/sqlite_range_store.h"\n'},
        "room store/postgres includes"),
    "access_includes_grpc_service_header": (
        {"service/access/authz.cc": '#include "hilo/v1/hilo.grpc.pb.h"\n'},
        "only rpc/ and the wiring may"),
    "unknown_room": (
        {"service/cache/cache.h": '#include "service/store/range_store.h"\n'},
        "service/ has no room 'cache'"),
    "proto_reaches_up_into_service": (
        {"proto/hilo/v1/extra.h": '#include "service/store/range_store.h"\n'},
        "proto/ includes service/store/range_store.h"),
    "proto_reaches_up_into_client": (
        {"proto/hilo/v1/extra.h": "#include <hilo/client.h>\n"},
        "proto/ includes hilo/client.h"),
    "base_includes_proto": (
        {"base/hilo/base/clock.h": '#include "hilo/v1/conversions.h"\n'},
        "base/ includes hilo/v1/conversions.h"),
    "testing_reaches_up_into_tests": (
        {"testing/fixture.h": '#include "tests/test_util.h"\n',
         "tests/test_util.h": "#include <string>\n"},
        "testing/ includes tests/test_util.h"),
    "service_includes_testing": (
        {"service/server.cc": '#include "testing/server_process.h"\n'},
        "testing/ is for tests only"),
    "client_includes_service": (
        {"client_cpp/src/client.cc": '#include "service/server.h"\n'},
        "client_cpp/ includes service/server.h"),
    "cli_includes_service": (
        {"cli/hilo.cc": '#include "hilo/client.h"\n'
                        '#include "service/store/range_store.h"\n'},
        "cli/ includes service/store/range_store.h"),
    "circle_through_a_source_file": (
        {"service/store/range_store.cc":
             '#include "service/store/collection_rules.h"\n'},
        "include circle among service/store/collection_rules, "
        "service/store/range_store"),
    "circle_among_three_in_tests": (
        {"tests/a.h": '#include "tests/b.h"\n',
         "tests/b.h": '#include "tests/c.h"\n',
         "tests/c.h": '#include "tests/a.h"\n'},
        "include circle among tests/a, tests/b, tests/c"),
}


def run_checker(root, *flags):
    return run_check(CHECKER, root, *flags)


class CheckLayeringTest(unittest.TestCase):

    def test_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, CLEAN)
            result = run_checker(root)
            self.assertEqual(result.returncode, 0, result.stdout)
            self.assertIn(f"{len(CLEAN)} files checked", result.stdout)

    def test_empty_tree_fails(self):
        with tempfile.TemporaryDirectory() as root:
            result = run_checker(root)
            self.assertEqual(result.returncode, 1)
            self.assertIn("no sources found", result.stderr)

    def test_each_planted_violation_fails(self):
        for name, (planted, words) in PLANTED.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as root:
                write_tree(root, {**CLEAN, **planted})
                result = run_checker(root)
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertIn(words, result.stdout)

    def test_known_circle_is_admitted_and_a_stale_admission_fails(self):
        circle = PLANTED["circle_among_three_in_tests"][0]
        flag = "--known_circle=tests/a,tests/b,tests/c"
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, {**CLEAN, **circle})
            result = run_checker(root, flag)
            self.assertEqual(result.returncode, 0, result.stdout)
            self.assertIn("known circle, admitted for now: tests/a, tests/b, "
                          "tests/c", result.stdout)
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, CLEAN)
            result = run_checker(root, flag)
            self.assertEqual(result.returncode, 1, result.stdout)
            self.assertIn("names no circle any more", result.stdout)


if __name__ == "__main__":
    unittest.main()
