#!/usr/bin/python3
"""The conformance runner's own checks must be able to fail.

A recovery bound (a step's until_ok_ms) holds only if the call that
succeeded answered within it, a --param that is not a positive number
of milliseconds is refused, an error's message must say what message_has
lists, and stopping a driver ends what it forked. No node or driver runs
here: the calls are answered by a script on a clock of the test's own (the
last test starts a shell as its driver).

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


class MessageTest(unittest.TestCase):
    """An expected error's message must hold every word of message_has."""

    ANSWER = {"ok": False, "code": "INTERNAL",
              "message": "127.0.0.1:5: NextRange replied with 193-224 of "
                         "node A, which overlaps 1-1099511627776"}

    def test_every_word_present_passes(self):
        self.assertTrue(scenario.Scenario._expect_code(
            self.ANSWER, {"code": "INTERNAL", "message_has": ["overlaps"]},
            "step 1"))

    def test_a_missing_word_fails(self):
        with self.assertRaisesRegex(Failure, r"does not say \['handed out'\]"):
            scenario.Scenario._expect_code(
                self.ANSWER, {"code": "INTERNAL",
                              "message_has": ["overlaps", "handed out"]},
                "step 1")


class DriverStopTest(unittest.TestCase):
    """Stopping a driver also ends a process it forked that outlived it
    (a forked child that hangs)."""

    def test_a_forked_child_left_behind_is_killed(self):
        import tempfile
        import time
        import driver
        with tempfile.TemporaryDirectory() as tmp:
            pid_file = os.path.join(tmp, "child")
            d = driver.Driver(["/bin/sh", "-c",
                               f"sleep 300 & echo $! > {pid_file}; "
                               f"cat > /dev/null"], "c1", tmp)
            limit = time.monotonic() + 10
            while not (os.path.exists(pid_file) and
                       open(pid_file).read().strip()):
                self.assertLess(time.monotonic(), limit)
                time.sleep(0.01)
            child = int(open(pid_file).read())
            started = driver._start_time(child)
            self.assertIsNotNone(started)
            self.addCleanup(lambda: driver._start_time(child) == started
                            and os.kill(child, 9))
            d.stop()
            limit = time.monotonic() + 10
            while driver._start_time(child) is not None and \
                    not _zombie(child):
                self.assertLess(time.monotonic(), limit,
                                f"process {child} still runs")
                time.sleep(0.01)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"Z"


if __name__ == "__main__":
    unittest.main()
