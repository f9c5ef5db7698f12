"""How a conformance scenario ends when it does not pass: Failure (an
expectation that did not hold) or Skip (the driver lacks an optional part
of PROTOCOL.md). Raised by every part of the runner, judged by run.py."""


class Failure(Exception):
    """A scenario's expectation that did not hold."""


class Skip(Exception):
    """The driver cannot do what the scenario needs (an optional part of
    PROTOCOL.md it does not offer): the scenario is skipped, not failed."""
