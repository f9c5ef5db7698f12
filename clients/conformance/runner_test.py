#!/usr/bin/python3
"""The conformance runner's own checks must be able to fail.

A recovery bound (a step's until_ok_ms) holds only if the call that
succeeded answered within it, and a --param that is not a positive number
of milliseconds is refused. No node or driver runs here: the calls are
answered by a script on a clock of the test's own.

Needs the generated Python stubs (module hilo.v1) on PYTHONPATH, as run.py.
"""
import contextlib
import io
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
import scenario  # noqa: E402
from outcomes import Failure  # noqa: E402


class FakeClock:
    """time.monotonic and time.sleep for scenario.py: only calls and
    sleeps move it."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def recovery(answers):
    """A Scenario whose calls answer `answers` in turn, each a pair
    (milliseconds the call takes, answer), on a FakeClock; and the clock."""
    clock = FakeClock()
    s = scenario.Scenario({"name": "t", "steps": []}, "server", ["driver"],
                          "/nonexistent")
    script = iter(answers)

    def timed(driver, request, step, where):
        took_ms, answer = next(script)
        clock.now += took_ms / 1000.0
        return answer

    s._timed = timed
    return s, clock


STEP = {"until_ok_ms": 3000, "retry_on": ["UNAVAILABLE"]}
DOWN = {"ok": False, "code": "UNAVAILABLE"}
UP = {"ok": True, "id": "1-A"}


class UntilOkTest(unittest.TestCase):
    def until_ok(self, answers):
        s, clock = recovery(answers)
        with mock.patch.object(scenario.time, "monotonic", clock.monotonic), \
                mock.patch.object(scenario.time, "sleep", clock.sleep):
            return s._until_ok(None, "next_id", "gone", STEP, "step 6"), s

    def test_success_within_the_bound_passes_and_is_noted(self):
        answer, s = self.until_ok([(100, DOWN), (100, UP)])
        self.assertTrue(answer["ok"])
        self.assertEqual(len(s.notes), 1)
        self.assertIn("step 6: ok after 250 ms", s.notes[0])

    def test_success_that_answered_after_the_bound_fails(self):
        # Retried at 2.9 s (before the bound), answered at 4.4 s: the
        # client served 1.4 s later than the step allows.
        answers = [(2850, DOWN), (1500, UP)]
        with self.assertRaisesRegex(Failure, r"step 6: ok only after 4400 ms;"
                                             r" the bound is 3000 ms"):
            self.until_ok(answers)

    def test_a_code_not_retried_ends_the_wait_at_once(self):
        answer, s = self.until_ok([(10, {"ok": False, "code": "INTERNAL"})])
        self.assertEqual(answer["code"], "INTERNAL")


class ParamTest(unittest.TestCase):
    def parse(self, *params):
        argv = ["--server", "s"]
        for p in params:
            argv += ["--param", p]
        return run.parse_args(argv + ["--driver", "d"])

    def test_a_positive_number_is_taken(self):
        self.assertEqual(self.parse("outage_ms=180000")["param"],
                         {"outage_ms": 180000})

    def test_what_is_not_a_positive_number_is_refused(self):
        for bad in ("outage_ms=-5", "outage_ms=0", "recovery_ms=+5",
                    "recovery_ms= 5", "recovery_ms=1_000", "recovery_ms=",
                    "recovery_ms=2.5", "=5", "recovery_ms"):
            with self.subTest(bad):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), \
                        self.assertRaises(SystemExit) as ended:
                    self.parse(bad)
                self.assertEqual(ended.exception.code, 2)
                self.assertIn("is not NAME=NUMBER", err.getvalue())

    def test_a_run_with_a_param_says_what_it_uses(self):
        spec = {"name": "t",
                "params": {"outage_ms": 30000, "recovery_ms": 3000},
                "steps": [{"do": "sleep_ms", "ms": "$outage_ms"}]}
        run_spec = run.with_params(spec, {"outage_ms": 180000})
        self.assertEqual(run_spec["steps"], [{"do": "sleep_ms", "ms": 180000}])
        self.assertEqual(run_spec["params"],
                         {"outage_ms": 180000, "recovery_ms": 3000})


if __name__ == "__main__":
    unittest.main()
