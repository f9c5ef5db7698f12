"""The fork gate (hilo_client._fork_gate, CONTRACT.md R16): a fork waits
for the calls in flight, and a child forked with one still out refuses
every call at once. Each test forks a real child; its verdict is its exit
code."""

import os
import threading
import unittest

import grpc

from hilo_client._fork_gate import _ForkGate
from hilo_client._values import HiloError

# Exit codes of the forked child.
OK, WRONG = 0, 1


def fork_through(gate, in_child):
    """Forks as os.register_at_fork would run `gate`'s handlers; the child
    runs in_child() and exits with its code. The child's exit code."""
    gate.before_fork()
    pid = os.fork()
    if pid == 0:
        code = WRONG
        try:
            gate.after_fork_in_child()
            code = in_child()
        finally:
            os._exit(code)
    gate.after_fork_in_parent()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class ForkGateTest(unittest.TestCase):

    def call_in_thread(self, gate, timeout, release):
        """A thread inside gate.call(timeout) until `release` is set; an
        event set once it has left the call."""
        entered, left = threading.Event(), threading.Event()

        def run():
            with gate.call(timeout):
                entered.set()
                release.wait()
            left.set()

        thread = threading.Thread(target=run)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(release.set)
        self.assertTrue(entered.wait(10))
        return left

    def test_fork_waits_for_the_call_in_flight_and_the_child_calls(self):
        gate = _ForkGate()
        release = threading.Event()
        left = self.call_in_thread(gate, 30, release)
        # The call ends while the fork waits for it.
        threading.Timer(0.1, release.set).start()

        def in_child():
            if not left.is_set():  # forked before the call ended
                return WRONG
            with gate.call(1):
                return OK

        self.assertEqual(fork_through(gate, in_child), OK)

    def test_a_child_forked_with_a_call_still_out_refuses_every_call(self):
        gate = _ForkGate()
        release = threading.Event()
        # Past its deadline (and the grace after it) and still not back.
        self.call_in_thread(gate, 0.01, release)

        def in_child():
            for _ in range(2):
                try:
                    with gate.call(1):
                        return WRONG
                except HiloError as e:
                    if (e.code != grpc.StatusCode.FAILED_PRECONDITION
                            or "forked while a hilo call" not in str(e)):
                        return WRONG
            return OK

        self.assertEqual(fork_through(gate, in_child), OK)
        # The parent is not affected: it still calls.
        with gate.call(1):
            pass

    def test_a_fork_with_nothing_in_flight_leaves_the_child_usable(self):
        gate = _ForkGate()
        with gate.call(1):
            pass

        def in_child():
            with gate.call(1):
                return OK

        self.assertEqual(fork_through(gate, in_child), OK)


if __name__ == "__main__":
    unittest.main()
