"""hilo_client: document IDs such as "orders/10-A" from a hilo service.

Mirrors the C++ hilo::Client: a cached range per collection, thread-safe,
each number kept with the tag of the node that issued its range, unused
ranges handed back on close() with their range tokens (retried, since a
node applies a tokened return at most once). Needs the generated stubs
(module hilo.v1, from scripts/gen-stubs.sh) on the import path.
"""

from hilo_client.client import Client, HiloError, Id

__all__ = ["Client", "HiloError", "Id"]
