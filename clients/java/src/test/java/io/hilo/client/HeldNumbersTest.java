package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.hilo.client.HeldNumbers.Span;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The interval summary of CONTRACT.md R11 ({@link HeldNumbers}): exact intervals after adds and removals, the
 * merge of the closest pair, and a range refused exactly when it overlaps, at each edge.
 */
class HeldNumbersTest {
  private static final long TOP = Long.MAX_VALUE;

  private static List<Span> spans(long... bounds) {
    List<Span> out = new ArrayList<>();
    for (int i = 0; i < bounds.length; i += 2) out.add(new Span(bounds[i], bounds[i + 1]));
    return out;
  }

  @Test
  void touching_ranges_become_one_interval() {
    assertEquals(spans(1, 96), HeldNumbers.addInterval(HeldNumbers.addInterval(List.of(), 1, 32), 33, 96));
  }

  @Test
  void four_intervals_are_kept_apart() {
    List<Span> s = List.of();
    for (long low : new long[] {1, 101, 1001}) s = HeldNumbers.addInterval(s, low, low + 9);
    s = HeldNumbers.addInterval(s, TOP, TOP);
    assertEquals(spans(1, 10, 101, 110, 1001, 1010, TOP, TOP), s);
  }

  @Test
  void a_fifth_merges_the_two_with_the_smallest_gap() {
    List<Span> four = spans(1, 10, 101, 110, 1001, 1010, TOP, TOP);
    // 120-130: gap 10 after 101-110, the smallest.
    assertEquals(spans(1, 10, 101, 130, 1001, 1010, TOP, TOP), HeldNumbers.addInterval(four, 120, 130));
    // 50-60: gaps 40 (from 10) and 41 (to 101): joins 1-10.
    assertEquals(spans(1, 60, 101, 110, 1001, 1010, TOP, TOP), HeldNumbers.addInterval(four, 50, 60));
    assertEquals(spans(1, 10, 101, 110, 1001, 1010, TOP, TOP), four);
  }

  @Test
  void a_tie_merges_the_lowest_pair() {
    assertEquals(spans(1, 11, 21, 21, 31, 31, 41, 41),
        HeldNumbers.addInterval(spans(1, 1, 11, 11, 21, 21, 31, 31), 41, 41));
  }

  @Test
  void the_two_highest_are_never_merged() {
    assertEquals(spans(1, 1010, 2001, 2010, 3001, 3010, 3020, 3030),
        HeldNumbers.addInterval(spans(1, 10, 1001, 1010, 2001, 2010, 3001, 3010), 3020, 3030));
  }

  /**
   * faults.stress_short's case: had 301-310 and 321-400 (the current range) become one, handing 321-400 back
   * would leave 301-320, and the node's next range, 311 on, refused.
   */
  @Test
  void a_gap_at_the_top_is_never_covered() {
    HeldNumbers held = new HeldNumbers();
    for (Span r : spans(1, 10, 101, 110, 201, 210, 301, 310, 321, 400)) held.add("A", r.low(), r.high());
    held.remove("A", 321, 400);
    assertEquals(spans(1, 110, 201, 210, 301, 310), held.intervals("A"));
    assertNull(held.problemWith("A", 311, 374));
  }

  @Test
  void remove_takes_a_tail_a_whole_or_a_middle() {
    assertEquals(spans(1, 40), HeldNumbers.removeInterval(spans(1, 96), 41, 96));
    assertEquals(spans(1, 32), HeldNumbers.removeInterval(spans(1, 96), 33, 96));
    assertEquals(spans(), HeldNumbers.removeInterval(spans(1, 96), 1, 96));
    assertEquals(spans(1, 39, 51, 96), HeldNumbers.removeInterval(spans(1, 96), 40, 50));
    assertEquals(spans(5, 5), HeldNumbers.removeInterval(spans(5, TOP), 6, TOP));
  }

  @Test
  void a_split_past_four_merges_again() {
    // 1-100 less 50-99 is 1-49 and 100-100: five, and the smallest gap is 49 to 100 (51; 100 to 201 is
    // 101), so they join again.
    assertEquals(spans(1, 100, 201, 210, 301, 310, 1001, 1010),
        HeldNumbers.removeInterval(spans(1, 100, 201, 210, 301, 310, 1001, 1010), 50, 99));
  }

  @Test
  void refused_exactly_when_overlapping_at_each_edge() {
    HeldNumbers held = new HeldNumbers();
    held.add("A", 33, 96);
    held.add("A", TOP, TOP);
    for (Span r : spans(96, 200, 1, 33, 40, 50, 1, 200, TOP - 5, TOP)) {
      assertNotNull(held.problemWith("A", r.low(), r.high()), r.toString());
    }
    assertNull(held.problemWith("A", 1, 32)); // below
    assertNull(held.problemWith("A", 97, 128)); // between
    assertNull(held.problemWith("B", 33, 96)); // another node
    assertEquals(spans(33, 96, TOP, TOP), held.intervals("A"));
  }

  @Test
  void tags_are_bounded_and_never_forgotten() {
    assertEquals(256, HeldNumbers.MAX_TAGS);
    HeldNumbers held = new HeldNumbers();
    for (int i = 0; i < HeldNumbers.MAX_TAGS; i++) {
      String tag = "T" + i;
      assertNull(held.problemWith(tag, 1, 1));
      held.add(tag, 1, 1);
      held.remove(tag, 1, 1);
    }
    assertNotNull(held.problemWith("NEW", 1, 1));
    assertNull(held.problemWith("T0", 1, 1)); // known, now empty
    assertEquals(spans(), held.intervals("T0"));
  }
}
