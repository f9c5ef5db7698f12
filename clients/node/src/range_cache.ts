// Collection: one collection's cache inside a HiloClient (the current range,
// the one fetched ahead, the fetch in flight, what the next NextRange
// reports) and the synchronous fast path that takes a number from it.
// Private to the package.

import { HiloError, StatusCode } from './errors.js';
import type { HiloClient } from './client.js';
import type { Range } from './range.js';
import type { HiloId } from './types.js';
import type { Timestamp } from './proto.js';

/** How many numbers of `r` were handed out. */
function taken(r: Range): number {
  return Number(r.takenUpTo() - r.low + 1n);
}

/** One collection's cache: the current range, the one fetched ahead, and what NextRange reports. */
export class Collection {
  readonly name: string;
  /** collection + separator. */
  readonly prefix: string;
  cur: Range | null = null;
  ahead: Range | null = null;
  /** The fetch in flight (foreground or prefetch), shared by every waiter; null when none. */
  inflight: Promise<void> | null = null;
  /** Set by close(): no range of this collection is used or fetched again. */
  retired = false;
  // Reported with every NextRange.
  lastSize = 0n;
  lastRangeAt: Timestamp | null = null;
  lastMax = 0n;
  /** The high of the last range accepted from each node (by tag). */
  readonly lastHighByTag = new Map<string, bigint>();
  // The runway's window, moved only by use(): it began when the range
  // before the current one came into use (the current one, for the first),
  // with the numbers taken of that earlier range.
  private usedSince = 0;
  private windowStart = 0;
  private windowTakenBefore = 0;
  private readonly client: HiloClient;

  constructor(client: HiloClient, name: string, separator: string) {
    this.client = client;
    this.name = name;
    this.prefix = name + separator;
  }

  /** Takes the next document ID if a range has one left; undefined otherwise. Never waits. */
  tryDocumentId(): string | undefined {
    const r = this.ready();
    return r === null ? undefined : this.prefix + this.take(r) + r.suffix;
  }

  /** Takes the next ID if a range has one left; undefined otherwise. Never waits. */
  tryId(): HiloId | undefined {
    const r = this.ready();
    return r === null ? undefined : { number: BigInt(this.take(r)), tag: r.tag };
  }

  /** The current range if it has a number left (the range fetched ahead moved in if need be), else null. */
  private ready(): Range | null {
    for (;;) {
      const r = this.cur;
      if (r !== null && !r.dry()) return r;
      if (!this.advance()) return null;
    }
  }

  /** Takes the next number of `r`, which has one left; taking the trigger number starts the prefetch. */
  private take(r: Range): number | bigint {
    if (r.small) {
      const n = r.next;
      r.next = n + 1;
      if (n === r.trigger) this.client._prefetch(this);
      return n;
    }
    const n = r.nextBig;
    r.nextBig = n + 1n;
    if (n === r.triggerBig) this.client._prefetch(this);
    return n;
  }

  /** Moves the range fetched ahead in when the current one is dry. */
  private advance(): boolean {
    if (this.ahead === null || (this.cur !== null && !this.cur.dry())) return false;
    this.use(this.ahead);
    this.ahead = null;
    return true;
  }

  /** Makes `range` the current one, and moves the runway's window on. */
  private use(range: Range): void {
    const now = this.client._now();
    if (this.cur !== null) {
      this.windowStart = this.usedSince;
      this.windowTakenBefore = taken(this.cur);
    } else {
      this.windowStart = now;
      this.windowTakenBefore = 0;
    }
    this.usedSince = now;
    this.cur = range;
  }

  /**
   * How many milliseconds the numbers this collection holds (the rest of
   * the current range and a range fetched ahead) last at the rate it handed
   * them out since its window began; undefined when it holds no range,
   * handed out no number in the window, or no time passed in it.
   */
  runwayMs(now: number): number | undefined {
    const r = this.cur;
    if (r === null || this.retired) return undefined;
    const done = taken(r);
    let held = Number(r.high - r.low + 1n) - done;
    if (this.ahead !== null) held += Number(this.ahead.high - this.ahead.low + 1n);
    const handedOut = this.windowTakenBefore + done;
    const window = now - this.windowStart;
    if (handedOut <= 0 || window <= 0) return undefined;
    return (window * held) / handedOut;
  }

  /** Puts a fetched range where callers find it. */
  place(range: Range): void {
    if (this.cur === null || this.cur.dry()) {
      this.use(range);
    } else if (this.ahead === null) {
      this.ahead = range;
    } else {
      // Unreachable: one fetch at a time, and none while a range waits ahead.
      throw new HiloError(StatusCode.INTERNAL, `collection "${this.name}" already holds two ranges`);
    }
  }
}
