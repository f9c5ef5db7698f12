"""What a client holds or handed out of each node's ranges of one
collection (CONTRACT.md R11): per node tag, at most MAX_INTERVALS disjoint
intervals [low, high] that cover every such number, so that a reply
overlapping them is refused (the node went back and could repeat them) and
any other range of that node, below, between or above, is taken."""

from typing import Dict, List, Optional, Tuple

MAX_INTERVALS = 4
MAX_TAGS = 256

Interval = Tuple[int, int]


def _merge_closest(spans: List[Interval]) -> List[Interval]:
    """Joins two neighbours until at most MAX_INTERVALS are left: of the
    pairs below the two highest intervals, the one with the smallest gap
    (the lowest on a tie). A merge only widens the union, so it may refuse
    more than it must, never less. The two highest hold the ranges in use
    (a healthy node's new range starts above every number it issued), whose
    unused numbers a return takes out again; a gap covered below them lies
    below numbers handed out for good, which a healthy node never issues
    again. A gap at the top would be issued again once the ranges above it
    went back (faults.stress_short saw that refused as INTERNAL)."""
    while len(spans) > MAX_INTERVALS:
        i = min(range(len(spans) - 3),
                key=lambda k: spans[k + 1][0] - spans[k][1])
        spans[i:i + 2] = [(spans[i][0], spans[i + 1][1])]
    return spans


def add_interval(spans: List[Interval], low: int, high: int) -> List[Interval]:
    """spans (sorted, disjoint) with [low, high] added; touching or
    overlapping intervals become one."""
    out: List[Interval] = []
    for s in sorted(spans + [(low, high)]):
        if out and s[0] - 1 <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], s[1]))
        else:
            out.append(s)
    return _merge_closest(out)


def remove_interval(spans: List[Interval], low: int,
                    high: int) -> List[Interval]:
    """spans without the numbers low..high (handed back unused)."""
    out: List[Interval] = []
    for s in spans:
        if s[1] < low or high < s[0]:
            out.append(s)
            continue
        if s[0] < low:
            out.append((s[0], low - 1))
        if high < s[1]:
            out.append((high + 1, s[1]))
    return _merge_closest(out)


class HeldNumbers:
    """Per node tag, the intervals of a collection's numbers the client
    holds or handed out. Not thread-safe: the range cache guards it, and
    the source checks a copy."""

    def __init__(self, by_tag: Optional[Dict[str, List[Interval]]] = None):
        self._by_tag: Dict[str, List[Interval]] = dict(by_tag or {})

    def copy(self) -> "HeldNumbers":
        return HeldNumbers(self._by_tag)

    def intervals(self, tag: str) -> List[Interval]:
        return list(self._by_tag.get(tag, []))

    def refusal(self, tag: str, low: int, high: int) -> Optional[str]:
        """Why a range low..high of `tag` may not be taken, or None."""
        spans = self._by_tag.get(tag)
        if spans is None:
            if len(self._by_tag) >= MAX_TAGS:
                return (f"NextRange replied with tag {tag!r}, but the client "
                        f"already keeps the numbers of {MAX_TAGS} node tags "
                        f"of this collection, the most it keeps")
            return None
        for s in spans:
            if s[0] <= high and low <= s[1]:
                return (f"NextRange replied with {low}-{high} of tag "
                        f"{tag!r}, which overlaps {s[0]}-{s[1]}, numbers the "
                        f"client holds or handed out of that node")
        return None

    def add(self, tag: str, low: int, high: int) -> None:
        self._by_tag[tag] = add_interval(self._by_tag.get(tag, []), low, high)

    def remove(self, tag: str, low: int, high: int) -> None:
        if low <= high and tag in self._by_tag:
            self._by_tag[tag] = remove_interval(self._by_tag[tag], low, high)
