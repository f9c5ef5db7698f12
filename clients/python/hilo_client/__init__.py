"""hilo_client: document IDs such as "orders/10-A" from a hilo service.

Mirrors the C++ hilo::Client: a cached range per collection, thread-safe,
the next range fetched ahead, each number kept with the tag of the node that
issued its range, unused ranges handed back on close() with their range
tokens (retried, since a node applies a tokened return at most once), and
the same stats counters. Needs the generated stubs
(module hilo.v1, from scripts/gen-stubs.sh) on the import path.
"""

try:
    import grpc  # noqa: F401  (checked here to say what to install)
except ImportError as _e:
    raise ImportError(
        "hilo_client needs the grpc module (grpcio): on Debian 12 install "
        "python3-grpcio and run Debian's /usr/bin/python3 (another python3 "
        "earlier on PATH does not see Debian's packages); elsewhere "
        "'pip install grpcio protobuf'") from _e

from hilo_client.client import Client, ClientStats, HiloError, Id  # noqa: E402

__all__ = ["Client", "ClientStats", "HiloError", "Id"]
