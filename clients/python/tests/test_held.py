"""The interval summary of CONTRACT.md R11 (hilo_client._held): exact
intervals after adds and removals, the merge of the closest pair, and a
range refused exactly when it overlaps, at each edge."""

import unittest

from hilo_client._held import (MAX_TAGS, HeldNumbers, add_interval,
                               remove_interval)

TOP = 2**63 - 1


class HeldNumbersTest(unittest.TestCase):

    def test_touching_ranges_become_one_interval(self):
        spans = add_interval([], 1, 32)
        spans = add_interval(spans, 33, 96)
        self.assertEqual(spans, [(1, 96)])

    def test_four_intervals_are_kept_apart(self):
        spans = []
        for low in (1, 101, 1001, TOP):
            spans = add_interval(spans, low, min(low + 9, TOP))
        self.assertEqual(spans, [(1, 10), (101, 110), (1001, 1010),
                                 (TOP, TOP)])

    def test_a_fifth_merges_the_two_with_the_smallest_gap(self):
        spans = [(1, 10), (101, 110), (1001, 1010), (TOP, TOP)]
        # gaps: 101-10 = 91, 1001-110 = 891; then 120 after 110: gap 10.
        self.assertEqual(add_interval(spans, 120, 130),
                         [(1, 10), (101, 130), (1001, 1010), (TOP, TOP)])
        # 50-60: gaps 40 (from 10) and 41 (to 101): 1-10 and 50-60 merge.
        self.assertEqual(add_interval(spans, 50, 60),
                         [(1, 60), (101, 110), (1001, 1010), (TOP, TOP)])

    def test_a_tie_merges_the_lowest_pair(self):
        spans = [(1, 1), (11, 11), (21, 21), (31, 31)]
        self.assertEqual(add_interval(spans, 41, 41),
                         [(1, 11), (21, 21), (31, 31), (41, 41)])

    def test_the_two_highest_are_never_merged(self):
        spans = [(1, 10), (1001, 1010), (2001, 2010), (3001, 3010)]
        self.assertEqual(add_interval(spans, 3020, 3030),
                         [(1, 1010), (2001, 2010), (3001, 3010), (3020, 3030)])

    def test_a_gap_at_the_top_is_never_covered(self):
        # faults.stress_short's case: had 301-310 and 321-400 (the current
        # range) become one, handing 321-400 back would leave 301-320, and
        # the node's next range, 311 on, refused.
        held = HeldNumbers()
        for low, high in ((1, 10), (101, 110), (201, 210), (301, 310),
                          (321, 400)):
            held.add("A", low, high)
        held.remove("A", 321, 400)
        self.assertEqual(held.intervals("A"),
                         [(1, 110), (201, 210), (301, 310)])
        self.assertIsNone(held.refusal("A", 311, 374))

    def test_remove_takes_a_tail_or_a_middle(self):
        self.assertEqual(remove_interval([(1, 96)], 41, 96), [(1, 40)])
        self.assertEqual(remove_interval([(1, 96)], 33, 96), [(1, 32)])
        self.assertEqual(remove_interval([(1, 96)], 1, 96), [])
        self.assertEqual(remove_interval([(1, 96)], 40, 50),
                         [(1, 39), (51, 96)])
        self.assertEqual(remove_interval([(5, TOP)], 6, TOP), [(5, 5)])

    def test_a_split_past_four_merges_again(self):
        spans = [(1, 100), (201, 210), (301, 310), (1001, 1010)]
        # 1-100 split at 50-99 into 1-49 and 100-100: five, and the
        # smallest gap is 49 to 100 (51; 100 to 201 is 101): 1-49 and
        # 100 become one again, which covers 50-99 (refuses more).
        self.assertEqual(remove_interval(spans, 50, 99),
                         [(1, 100), (201, 210), (301, 310), (1001, 1010)])

    def test_refused_exactly_when_overlapping_at_each_edge(self):
        held = HeldNumbers()
        held.add("A", 33, 96)
        held.add("A", TOP, TOP)
        self.assertIsNotNone(held.refusal("A", 96, 200))   # top edge
        self.assertIsNotNone(held.refusal("A", 1, 33))     # bottom edge
        self.assertIsNotNone(held.refusal("A", 40, 50))    # inside
        self.assertIsNotNone(held.refusal("A", 1, 200))    # around
        self.assertIsNotNone(held.refusal("A", TOP - 5, TOP))
        self.assertIsNone(held.refusal("A", 1, 32))        # below
        self.assertIsNone(held.refusal("A", 97, 128))      # between
        self.assertIsNone(held.refusal("B", 33, 96))       # another node
        self.assertEqual(held.intervals("A"), [(33, 96), (TOP, TOP)])

    def test_copy_is_independent(self):
        held = HeldNumbers()
        held.add("A", 1, 32)
        copy = held.copy()
        held.add("A", 33, 40)
        self.assertEqual(copy.intervals("A"), [(1, 32)])
        self.assertEqual(held.intervals("A"), [(1, 40)])

    def test_tags_are_bounded_and_never_forgotten(self):
        held = HeldNumbers()
        for i in range(MAX_TAGS):
            tag = f"T{i}"
            self.assertIsNone(held.refusal(tag, 1, 1))
            held.add(tag, 1, 1)
            held.remove(tag, 1, 1)
        self.assertEqual(MAX_TAGS, 256)
        self.assertIsNotNone(held.refusal("NEW", 1, 1))
        self.assertIsNone(held.refusal("T0", 1, 1))  # known, now empty


if __name__ == "__main__":
    unittest.main()
