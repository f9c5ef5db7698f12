#!/usr/bin/python3
"""Holds service/'s rooms to their order: a room includes only rooms below it.

  wiring (service/*.cc, service/*.h)
  rpc/        the services and their gRPC faces
  observe/    metrics, probes, log limits
  access/     authorization, audit, limits, TLS
  store/      the range model, its rules, group commit
    store/sqlite/, store/postgres/   the two engines (neither uses the other)

Also: only rpc/ and the wiring include a generated gRPC service header
(*.grpc.pb.h); store/ includes nothing of gRPC or Prometheus; the client
(client_cpp/) includes nothing of service/; no production code includes
testing/ (the helpers tests share).

Usage: check_layering.py SOURCE_ROOT. Prints one line per violation
(file:line: what it includes and why that is refused) and exits 1 if there
is any, else prints a summary and exits 0.
"""
import os
import re
import sys

# Room -> the rooms (besides itself) it may include. Order is the picture above.
ALLOWED = {
    "store": set(),
    "store/sqlite": {"store"},
    "store/postgres": {"store"},
    "access": {"store"},
    "observe": {"store", "access"},
    "rpc": {"store", "access", "observe"},
    "wiring": {"store", "store/sqlite", "store/postgres", "access", "observe",
               "rpc"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of_path(relpath):
    """The room a file under service/ belongs to, or None for other files."""
    if not relpath.startswith("service/"):
        return None
    parts = relpath.split("/")[1:-1]  # folders below service/
    if not parts:
        return "wiring"
    if parts[0] == "store" and len(parts) > 1:
        return "store/" + parts[1]
    return parts[0]


def sources(root, top):
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for name in sorted(files):
            if name.endswith((".h", ".cc")):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def includes(root, relpath):
    with open(os.path.join(root, relpath), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def check(root):
    problems = []
    checked = 0
    for relpath in sources(root, "service"):
        room = room_of_path(relpath)
        checked += 1
        for line, target in includes(root, relpath):
            where = f"{relpath}:{line}"
            target_room = room_of_path(target)
            if target_room is not None and target_room != room and \
                    target_room not in ALLOWED[room]:
                problems.append(
                    f"{where}: room {room} includes {target} (room "
                    f"{target_room}); {room} may use "
                    f"{', '.join(sorted(ALLOWED[room])) or 'no other room'}")
            if target.endswith(".grpc.pb.h") and room not in ("rpc", "wiring"):
                problems.append(
                    f"{where}: room {room} includes the generated gRPC service "
                    f"header {target}; only rpc/ and the wiring may")
            if room.startswith("store") and (
                    target.startswith(("grpcpp/", "grpc/", "prometheus/"))
                    or target.startswith("hilo/v1/")):
                problems.append(
                    f"{where}: room {room} includes {target}; the store knows "
                    f"nothing of gRPC, the wire messages or metrics")
            if target.startswith("testing/"):
                problems.append(
                    f"{where}: production code includes {target}; testing/ is "
                    f"for tests only")
    for top in ("client_cpp", "cli", "base"):
        for relpath in sources(root, top):
            checked += 1
            for line, target in includes(root, relpath):
                if target.startswith("service/"):
                    problems.append(
                        f"{relpath}:{line}: {top}/ includes {target}; only the "
                        f"server and its tests use service/")
                if target.startswith("testing/"):
                    problems.append(
                        f"{relpath}:{line}: production code includes {target}; "
                        f"testing/ is for tests only")
    return checked, problems


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} SOURCE_ROOT", file=sys.stderr)
        return 2
    checked, problems = check(argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the rooms' order",
              file=sys.stderr)
        return 1
    if checked == 0:
        print("no sources found under service/: wrong SOURCE_ROOT?",
              file=sys.stderr)
        return 1
    print(f"{checked} files checked; every include goes down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
