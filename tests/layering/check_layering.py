#!/usr/bin/python3
"""Holds the C++ tree to its order: every include goes down, and none goes round.

The parts, from the bottom up (a part may include the parts listed after it):

  base/        hilo/base/*: nothing of the project
  proto/       hilo/v1/*: the wire messages; base/
  service/     a hilo node, in rooms, each using only the rooms below it:
    store/                           the range model, its rules, group commit
      store/sqlite/, store/postgres/ the two engines (neither uses the other)
    access/    authorization, audit, limits, TLS
    observe/   metrics, probes, log limits
    rpc/       the services and their gRPC faces
    wiring     service/*.cc, service/*.h, and service/wiring/
  client_cpp/  the C++ client: base/, proto/
  cli/         the `hilo` command: client_cpp/, base/, proto/
  testing/     what tests share: any production part, never tests/ or the tools

Besides: only rpc/ and the wiring include a generated gRPC service header
(*.grpc.pb.h); store/ includes nothing of gRPC, Prometheus or the wire
messages; no production part includes testing/. Both spellings of an include
are read ("..." and <...>), so a header cannot slip through in angle brackets.

And no circle: a source and its header are one unit (x.h with x.cc), and no
unit reaches itself through the includes of the units it uses, anywhere in the
tree (tests and tools included).

Usage: check_layering.py [--known_circle=UNIT,UNIT...]... SOURCE_ROOT.
Prints one line per violation (file:line: what it includes and why that is
refused) and exits 1 if there is any, else prints a summary and exits 0.
A --known_circle is a circle admitted for now (ctest names each with its
reason): it is reported, not counted, and one that no longer exists is an
error, so the admission goes when the circle does. check_layering_test.py plants each
kind of violation in a small tree and expects it to be refused.
"""
import os
import re
import sys

# service/ room -> the rooms (besides itself) it may include.
ROOMS = {
    "store": set(),
    "store/sqlite": {"store"},
    "store/postgres": {"store"},
    "access": {"store"},
    "observe": {"store", "access"},
    "rpc": {"store", "access", "observe"},
    "wiring": {"store", "store/sqlite", "store/postgres", "access", "observe",
               "rpc"},
}

# Top-level part -> the parts (besides itself) it may include. "service" here
# stands for every room of service/ (the rooms' own order is ROOMS).
PARTS = {
    "base": set(),
    "proto": {"base"},
    "service": {"base", "proto"},
    "client_cpp": {"base", "proto"},
    "cli": {"base", "proto", "client_cpp"},
    "testing": {"base", "proto", "service", "client_cpp", "cli"},
}
PRODUCTION = ("base", "proto", "service", "client_cpp", "cli")

# Folders whose sources are only checked for circles (nothing includes them
# but themselves and the tests).
OTHER_TOPS = ("tests", "bench", "stress", "fuzz", "examples")

# Planted violations for check_layering_test.py live in temporary trees, but
# keep any such folder out of the real tree's scan.
SKIP = ("tests/layering/fixtures/",)

INCLUDE = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]')


def part_of(relpath):
    """(part, room) of a project file, e.g. ("service", "store/sqlite")."""
    top = relpath.split("/", 1)[0]
    if top != "service":
        return top, None
    folders = relpath.split("/")[1:-1]
    if not folders or folders[0] == "wiring":
        return "service", "wiring"
    if folders[0] == "store" and len(folders) > 1:
        return "service", "store/" + folders[1]
    return "service", folders[0]


def resolve(target):
    """The project path an include names, or None if it is not the project's.

    Mirrors the include directories the CMake targets export: hilo/base/ is
    base/, hilo/v1/ is proto/ (generated files included), hilo/client.h and
    hilo/admin_client.h are the C++ client's public headers; everything else
    of ours is spelled from the repository root.
    """
    if target.startswith("hilo/base/"):
        return "base/" + target
    if target.startswith("hilo/v1/"):
        return "proto/" + target
    if target.startswith("hilo/"):
        return "client_cpp/include/" + target
    top = target.split("/", 1)[0]
    if top in PARTS or top in OTHER_TOPS:
        return target
    return None


def sources(root, top):
    for dirpath, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".h", ".cc")):
                relpath = os.path.relpath(os.path.join(dirpath, name), root)
                if not relpath.startswith(SKIP):
                    yield relpath


def includes(root, relpath):
    with open(os.path.join(root, relpath), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(2)


def order_problems(relpath, line, target, resolved):
    """Why `relpath` may not include `target` (resolved: its project path)."""
    where = f"{relpath}:{line}"
    part, room = part_of(relpath)
    if part not in PARTS:
        return []
    problems = []
    if part == "service" and room not in ROOMS:
        problems.append(
            f"{where}: service/ has no room {room!r}; name its place in "
            f"service/CMakeLists.txt and in this check before using it")
        return problems
    if resolved is not None:
        target_part, target_room = part_of(resolved)
        if target_part != part and target_part not in PARTS[part]:
            allowed = ", ".join(sorted(PARTS[part])) or "nothing of the project"
            if part in PRODUCTION and target_part == "testing":
                why = "testing/ is for tests only"
            else:
                why = f"{part}/ may use {allowed}"
            problems.append(f"{where}: {part}/ includes {target}; {why}")
        elif (part == target_part == "service" and target_room != room
              and target_room not in ROOMS.get(room, set())):
            allowed = ", ".join(sorted(ROOMS[room])) or "no other room"
            problems.append(
                f"{where}: room {room} includes {target} (room {target_room}); "
                f"{room} may use {allowed}")
    if part == "service" and target.endswith(".grpc.pb.h") and \
            room not in ("rpc", "wiring"):
        problems.append(
            f"{where}: room {room} includes the generated gRPC service header "
            f"{target}; only rpc/ and the wiring may")
    if part == "service" and room.startswith("store") and target.startswith(
            ("grpcpp/", "grpc/", "grpc++/", "prometheus/", "hilo/v1/")):
        problems.append(
            f"{where}: room {room} includes {target}; the store knows nothing "
            f"of gRPC, the wire messages or metrics")
    return problems


def unit_of(relpath):
    return relpath[:-len(".cc")] if relpath.endswith(".cc") else \
        relpath[:-len(".h")]


def circles(edges):
    """Each group of units that reach one another (Tarjan), as sorted lists."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(unit):
        # Iterative, so a deep include chain cannot exhaust Python's stack.
        work = [(unit, iter(sorted(edges.get(unit, ()))))]
        index[unit] = low[unit] = counter[0]
        counter[0] += 1
        stack.append(unit)
        on_stack.add(unit)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for unit in sorted(edges):
        if unit not in index:
            visit(unit)
    return sorted(found)


def check(root, known_circles=()):
    problems = []
    checked = 0
    edges = {}
    where_of = {}
    for top in tuple(PARTS) + OTHER_TOPS:
        for relpath in sources(root, top):
            checked += 1
            unit = unit_of(relpath)
            edges.setdefault(unit, set())
            for line, target in includes(root, relpath):
                resolved = resolve(target)
                problems += order_problems(relpath, line, target, resolved)
                if resolved is None or not resolved.endswith((".h", ".cc")):
                    continue
                if not os.path.exists(os.path.join(root, resolved)):
                    continue  # generated (hilo/v1/*.pb.h) or not ours
                other = unit_of(resolved)
                if other != unit:
                    edges[unit].add(other)
                    where_of.setdefault((unit, other), f"{relpath}:{line}")
    unmatched = {frozenset(c) for c in known_circles}
    for group in circles(edges):
        members = set(group)
        if frozenset(group) in unmatched:
            unmatched.discard(frozenset(group))
            print(f"known circle, admitted for now: {', '.join(group)}")
            continue
        links = [where_of[(a, b)] for a in group for b in sorted(edges[a])
                 if b in members]
        problems.append(
            f"include circle among {', '.join(group)} (through "
            f"{'; '.join(links)}): split what both need into a unit below them")
    for circle in sorted(sorted(c) for c in unmatched):
        problems.append(
            f"--known_circle={','.join(circle)} names no circle any more: "
            f"drop the admission")
    return checked, problems


def main(argv):
    known = [a.split("=", 1)[1].split(",") for a in argv[1:]
             if a.startswith("--known_circle=")]
    args = [a for a in argv[1:] if not a.startswith("--known_circle=")]
    if len(args) != 1:
        print(f"usage: {argv[0]} [--known_circle=UNIT,UNIT...]... SOURCE_ROOT",
              file=sys.stderr)
        return 2
    checked, problems = check(args[0], known)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the tree's order",
              file=sys.stderr)
        return 1
    if checked == 0:
        print("no sources found: wrong SOURCE_ROOT?", file=sys.stderr)
        return 1
    print(f"{checked} files checked; every include goes down, and no circle "
          f"but those admitted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
