#!/usr/bin/python3
"""--help of a hilo program: exit 0, the program's own flags grouped by
topic, each with its default, and none left out.

  help_test.py PROGRAM TITLE...

TITLE: the group titles --help must show, in order. Every flag that
--helpfull lists from a file that is not Abseil's must appear in --help
under one of them (never under "Other"), with a default.
"""
import re
import subprocess
import sys


def run(program, flag):
    done = subprocess.run([program, flag], capture_output=True, text=True,
                          timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


def own_flags_from_helpfull(text):
    flags, own = set(), False
    for line in text.splitlines():
        m = re.match(r"\s*Flags from (\S+):", line)
        if m:
            own = "absl/" not in m.group(1)
            continue
        m = re.match(r"\s{4}--(\w+) ", line)
        if m and own:
            flags.add(m.group(1))
    return flags


def main(argv):
    program, titles = argv[1], argv[2:]
    problems = []
    code, out, err = run(program, "--help")
    if code != 0:
        problems.append(f"--help exited {code}, want 0 (stderr: {err.strip()})")
    if "No flags matched" in out + err:
        problems.append("--help says 'No flags matched'")
    # A group is a title line followed by a flag line.
    shown_titles = re.findall(r"^(\S[^:\n]*):\n  --", out, re.M)
    if shown_titles != titles:
        problems.append(f"--help groups are {shown_titles}, want {titles}")
    listed = set(re.findall(r"^  --(\w+)", out, re.M))
    code, full, _ = run(program, "--helpfull")
    own = own_flags_from_helpfull(full)
    if not own:
        problems.append("--helpfull listed none of the program's own flags")
    missing = sorted(own - listed)
    if missing:
        problems.append(f"flags missing from --help: {', '.join(missing)}")
    if re.search(r"^  --(flagfile|fromenv|helpfull)\b", out, re.M):
        problems.append("--help lists Abseil's own flags")
    for p in problems:
        print("FAIL:", p)
    if problems:
        print(out)
        return 1
    print(f"ok: {len(listed)} flags in {len(titles)} groups, exit 0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
