// What a client holds or handed out of each node's ranges of one collection
// (CONTRACT.md R11). A reply overlapping it is refused: the node went back
// (a store restored, a failover it did not see) and could issue those
// numbers again. Any other range of that node, below, between or above,
// repeats nothing of this client's and is taken.

/** The intervals kept per node tag. */
export const MAX_HELD_INTERVALS = 4;
/**
 * The node tags kept per collection; a reply of a new tag past it is
 * refused, since a tag's numbers are never forgotten while the node could
 * repeat them.
 */
export const MAX_HELD_TAGS = 256;

/** [low, high], both in. */
export type Interval = readonly [bigint, bigint];

/**
 * Joins two neighbours until at most MAX_HELD_INTERVALS are left: of the
 * pairs below the two highest intervals, the one with the smallest gap. The
 * two highest hold the ranges in use (a healthy node's new range starts
 * above every number it issued), whose unused numbers a return takes out
 * again; a gap covered below them lies below numbers handed out for good,
 * which a healthy node never issues again. A gap at the top would be issued
 * again once the ranges above it went back (faults.stress_short saw that
 * refused as INTERNAL in the C++ client).
 */
function mergeClosest(spans: Interval[]): Interval[] {
  while (spans.length > MAX_HELD_INTERVALS) {
    let best = 0;
    for (let i = 1; i + 3 < spans.length; i++) {
      if (spans[i + 1][0] - spans[i][1] < spans[best + 1][0] - spans[best][1]) best = i;
    }
    spans.splice(best, 2, [spans[best][0], spans[best + 1][1]]);
  }
  return spans;
}

/** `spans` (sorted, disjoint) with low..high added; touching or overlapping intervals become one. */
export function addInterval(spans: readonly Interval[], low: bigint, high: bigint): Interval[] {
  const all = [...spans, [low, high] as Interval].sort((a, b) =>
    a[0] !== b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0,
  );
  const out: Interval[] = [];
  for (const s of all) {
    const last = out[out.length - 1];
    if (last !== undefined && s[0] - 1n <= last[1]) {
      out[out.length - 1] = [last[0], s[1] > last[1] ? s[1] : last[1]];
    } else {
      out.push(s);
    }
  }
  return mergeClosest(out);
}

/** `spans` without the numbers low..high. */
export function removeInterval(spans: readonly Interval[], low: bigint, high: bigint): Interval[] {
  const out: Interval[] = [];
  for (const s of spans) {
    if (s[1] < low || high < s[0]) {
      out.push(s);
      continue;
    }
    if (s[0] < low) out.push([s[0], low - 1n]);
    if (high < s[1]) out.push([high + 1n, s[1]]);
  }
  return mergeClosest(out);
}

/** What a reply is judged by (RangeSource.next). */
export interface HeldView {
  /** Why low..high of `tag` may not be taken, or null. */
  problemWith(tag: string, low: bigint, high: bigint): string | null;
}

/**
 * Per node tag, at most MAX_HELD_INTERVALS sorted, disjoint intervals that
 * cover every number of that node the client holds or handed out. When one
 * more would be needed, two neighbours below the two highest intervals,
 * those with the smallest gap between them, become one (the lowest pair on
 * a tie): the union only grows, so a range may be refused that need not
 * be, never the other way round. A range handed back loses its unused
 * numbers.
 */
export class HeldNumbers implements HeldView {
  private readonly byTag = new Map<string, Interval[]>();

  problemWith(tag: string, low: bigint, high: bigint): string | null {
    const spans = this.byTag.get(tag);
    if (spans === undefined) {
      if (this.byTag.size < MAX_HELD_TAGS) return null;
      return `NextRange replied with node tag ${tag}, but the client already keeps the numbers of ${MAX_HELD_TAGS} node tags of this collection, the most it keeps`;
    }
    for (const [l, h] of spans) {
      if (l <= high && low <= h) {
        return `NextRange replied with ${low}-${high} of node ${tag}, which overlaps ${l}-${h}, numbers the client holds or handed out of that node`;
      }
    }
    return null;
  }

  add(tag: string, low: bigint, high: bigint): void {
    this.byTag.set(tag, addInterval(this.byTag.get(tag) ?? [], low, high));
  }

  /** Forgets low..high of `tag` (numbers handed back unused). */
  remove(tag: string, low: bigint, high: bigint): void {
    const spans = this.byTag.get(tag);
    if (spans !== undefined && low <= high) this.byTag.set(tag, removeInterval(spans, low, high));
  }

  intervals(tag: string): Interval[] {
    return [...(this.byTag.get(tag) ?? [])];
  }
}
