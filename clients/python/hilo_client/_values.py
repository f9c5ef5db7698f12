"""The values a Client hands to its callers: Id (a number and its node tag),
HiloError (a failed call, with its grpc.StatusCode) and ClientStats (the
counters). All three are public, exported by hilo_client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, NamedTuple

import grpc


class Id(NamedTuple):
    """One number and the tag of the node whose range it came from."""

    number: int
    node_tag: str


class HiloError(Exception):
    """A failed call: ``code`` is the grpc.StatusCode, as the C++ client's
    absl::Status code. INVALID_ARGUMENT for a bad collection name (from the
    server); UNAVAILABLE, naming every target, when no server answered within
    its deadline; INTERNAL, naming every target, when a reply broke the
    contract (an invalid range or node tag, or a range at or below one the
    client had from that node) and no other target gave a
    usable range; FAILED_PRECONDITION for a call after close(); otherwise
    the server's code."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class _ClosedError(HiloError, RuntimeError):
    """A call on a closed client: a HiloError with FAILED_PRECONDITION, as
    in the Go, Java and Node clients (CONTRACT.md R13: not to be retried
    until the state changes, which for a closed client means a new one),
    and a RuntimeError, which is what such a call raised before."""

    def __init__(self, collection: str):
        super().__init__(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"the hilo client is closed; no more IDs of collection "
            f"{_shown(collection)} (make a new Client)")


def _shown(collection: str) -> str:
    """`collection` quoted for a message: whole up to 256 characters (a
    name a node takes has at most 256 bytes), else its start and length, so
    that a caller's name is never copied unbounded."""
    if len(collection) <= 256:
        return repr(collection)
    return f"{collection[:32]!r}... ({len(collection)} characters)"



@dataclass
class ClientStats:
    """Counters of a client's behaviour since it was created, named as the
    C++ hilo::ClientStats: each only grows.

    calls_waited: next_id calls that waited for a range to arrive from a
        server (or for the error of that attempt), rather than taking a
        cached number or a range fetched ahead.
    ranges_fetched: ranges a server issued to this client, however they
        were asked for; ranges_prefetched: of those, the ones fetched ahead
        of need (prefetch_at).
    failovers: NextRange calls that another target answered because the
        preferred one failed; that target is preferred from then on.
    returns_applied, returns_refused, returns_failed: unused ranges handed
        back (close, return_unused_ranges), one count per range: the node
        took them back; it refused them (it had issued a newer range: normal,
        the numbers stay unused); no answer after the retries, or an error
        (logged).
    errors: failed range fetches (prefetches included) and returns, by
        grpc.StatusCode; codes that never occurred are absent.
    runway: not a counter: per collection, the seconds the numbers the
        client holds (the rest of its current range and a range fetched
        ahead) last at the rate it handed them out since its previous range
        began (CONTRACT.md R14). The server sizes ranges so that a
        collection in steady use still holds its --range_runway (30 s)
        when it asks for the next one. Collections holding no numbers, or
        that handed none out yet, are absent.
    """

    calls_waited: int = 0
    ranges_fetched: int = 0
    ranges_prefetched: int = 0
    failovers: int = 0
    returns_applied: int = 0
    returns_refused: int = 0
    returns_failed: int = 0
    errors: Dict[grpc.StatusCode, int] = field(default_factory=dict)
    runway: Dict[str, float] = field(default_factory=dict)
