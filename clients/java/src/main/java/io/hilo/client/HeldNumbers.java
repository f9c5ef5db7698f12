package io.hilo.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What a client holds or handed out of each node's ranges of one collection (CONTRACT.md R11). A reply
 * overlapping it is refused: the node went back (a store restored, a failover it did not see) and could issue
 * those numbers again. Any other range of that node, below, between or above, repeats nothing of this
 * client's and is taken.
 *
 * <p>Per node tag, at most {@link #MAX_INTERVALS} sorted, disjoint intervals that cover every such number.
 * When one more would be needed, two neighbours below the two highest intervals, those with the smallest gap
 * between them, become one (the lowest pair on a tie): the union only grows, so a range may be refused that
 * need not be, never the other way round. A range handed back loses its unused numbers. At most {@link #MAX_TAGS} tags are kept; a reply of a
 * new tag past that is refused, since a tag's numbers are never forgotten while the node could repeat them.
 * Thread-safe: the cache writes it under its lock, the fetcher's check reads it from another thread.
 */
final class HeldNumbers {
  static final int MAX_INTERVALS = 4;
  static final int MAX_TAGS = 256;

  /** [low, high], both in. */
  record Span(long low, long high) {
    @Override
    public String toString() {
      return low + "-" + high;
    }
  }

  private final Map<String, List<Span>> byTag = new HashMap<>();

  /**
   * Joins two neighbours until at most MAX_INTERVALS are left: of the pairs below the two highest intervals,
   * the one with the smallest gap. The two highest hold the ranges in use (a healthy node's new range starts
   * above every number it issued), whose unused numbers a return takes out again; a gap covered below them
   * lies below numbers handed out for good, which a healthy node never issues again. A gap at the top would
   * be issued again once the ranges above it went back (faults.stress_short saw that refused as INTERNAL in
   * the C++ client).
   */
  private static List<Span> mergeClosest(List<Span> spans) {
    while (spans.size() > MAX_INTERVALS) {
      int best = 0;
      for (int i = 1; i + 3 < spans.size(); i++) {
        if (spans.get(i + 1).low() - spans.get(i).high() < spans.get(best + 1).low() - spans.get(best).high()) {
          best = i;
        }
      }
      spans.set(best, new Span(spans.get(best).low(), spans.get(best + 1).high()));
      spans.remove(best + 1);
    }
    return spans;
  }

  /** spans (sorted, disjoint) with low..high added; touching or overlapping intervals become one. */
  static List<Span> addInterval(List<Span> spans, long low, long high) {
    List<Span> all = new ArrayList<>(spans);
    all.add(new Span(low, high));
    all.sort((a, b) -> a.low() != b.low() ? Long.compare(a.low(), b.low()) : Long.compare(a.high(), b.high()));
    List<Span> out = new ArrayList<>();
    for (Span s : all) {
      // s.low() - 1 cannot overflow: every low is at least 1.
      if (!out.isEmpty() && s.low() - 1 <= out.get(out.size() - 1).high()) {
        Span last = out.get(out.size() - 1);
        out.set(out.size() - 1, new Span(last.low(), Math.max(last.high(), s.high())));
      } else {
        out.add(s);
      }
    }
    return mergeClosest(out);
  }

  /** spans without the numbers low..high. */
  static List<Span> removeInterval(List<Span> spans, long low, long high) {
    List<Span> out = new ArrayList<>();
    for (Span s : spans) {
      if (s.high() < low || high < s.low()) {
        out.add(s);
        continue;
      }
      if (s.low() < low) out.add(new Span(s.low(), low - 1));
      if (high < s.high()) out.add(new Span(high + 1, s.high()));
    }
    return mergeClosest(out);
  }

  /** Null if low..high of tag may be taken, else why not. */
  synchronized String problemWith(String tag, long low, long high) {
    List<Span> spans = byTag.get(tag);
    if (spans == null) {
      if (byTag.size() < MAX_TAGS) return null;
      return "NextRange replied with node tag " + tag + ", but the client already keeps the numbers of "
          + MAX_TAGS + " node tags of this collection, the most it keeps";
    }
    for (Span s : spans) {
      if (s.low() <= high && low <= s.high()) {
        return "NextRange replied with " + low + "-" + high + " of node " + tag + ", which overlaps " + s
            + ", numbers the client holds or handed out of that node";
      }
    }
    return null;
  }

  synchronized void add(String tag, long low, long high) {
    byTag.put(tag, addInterval(byTag.getOrDefault(tag, List.of()), low, high));
  }

  /** Forgets low..high of tag (numbers handed back unused). */
  synchronized void remove(String tag, long low, long high) {
    List<Span> spans = byTag.get(tag);
    if (spans != null && low <= high) byTag.put(tag, removeInterval(spans, low, high));
  }

  synchronized List<Span> intervals(String tag) {
    return List.copyOf(byTag.getOrDefault(tag, List.of()));
  }
}
