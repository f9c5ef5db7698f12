"""The table of bench/client_latency.sh: reads its RESULT lines (one per
run: key=value pairs, times in nanoseconds) and prints a Markdown table, one
row per language, call and thread count, each figure the median of the runs
with their range. "≥ 1 µs" is the share of calls that took 1 µs or more. Prefetch-off runs are left out; C++'s timer-only runs
(call=none) are kept, as the machine's own pauses.

    python3 bench/client_latency_table.py RUNS_FILE
"""

import statistics
import sys

LANGS = ["C++", "Go", "Java", "Node", "Python"]
CALLS = ["NextId", "CollectionHandle::NextId", "NextDocumentId", "none"]


def fmt_ns(ns):
    if ns < 1000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1000:.3g} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def cell(values, fmt):
    mid = fmt(statistics.median(values))
    if len(values) == 1 or min(values) == max(values):
        return mid
    return f"{mid} ({fmt(min(values))}–{fmt(max(values))})"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = {}
    loads = []
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            r = dict(kv.split("=", 1) for kv in line.split()[1:])
            loads.append(float(r["load"]))
            if r["prefetch"] != "on" and r["call"] != "none":
                continue
            key = (r["lang"], r["call"], int(r["threads"]))
            runs.setdefault(key, []).append(r)
    print("| client | call | threads | runs | calls/s | waited | ≥ 1 µs "
          "| p50 | p99 | p99.9 | p99.99 | max |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = lambda k: (LANGS.index(k[0]) if k[0] in LANGS else 99,
                       CALLS.index(k[1]), k[2])
    for key in sorted(runs, key=order):
        rs = runs[key]
        col = lambda name: [float(r[name]) for r in rs]
        rate = [float(r["calls"]) / float(r["seconds"]) for r in rs]
        slow = [100 * float(r["slow_1us"]) / float(r["calls"]) for r in rs]
        call = ("none: two timer reads" if key[1] == "none"
                else f"`{key[1]}`")
        print(f"| {key[0]} | {call} | {key[2]} | {len(rs)} "
              f"| {cell(rate, lambda v: f'{v / 1e6:.3g} M')} "
              f"| {cell(col('waited'), lambda v: f'{v:.0f}')} "
              f"| {cell(slow, lambda v: f'{v:.3f} %')} | "
              + " | ".join(cell(col(c), fmt_ns) for c in
                           ("p50", "p99", "p999", "p9999", "max")) + " |")
    if loads:
        print(f"\nLoad average (1 min) at the start of each round: "
              f"{min(loads):.2f}–{max(loads):.2f}.")


if __name__ == "__main__":
    main()
