// RangeCache: one collection's numbers inside a HiloClient. It holds the
// current range, the one fetched ahead, the fetch or return in flight, what
// the next NextRange reports, each node's numbers held (CONTRACT.md R11)
// and the collection's counters; it hands numbers out on a synchronous fast path
// and refills itself through a RangeSource, the one call it makes. It never
// sees the client that owns it: when it forgets itself (a collection that
// never received a range, after a failed call) it only tells the context, which
// drops it from the client's table and looks a name up again. Private to the
// package.
//
// One operation at a time talks to the servers for a collection: a fetch
// (a caller's, or the prefetch started by taking the number at prefetchAt
// of a range) or a return (takeUnused .. endReturn). It is `inflight`, a
// promise every caller that finds no number awaits; it is cleared when it
// settles, so after a failed fetch the next caller asks again.

import { HiloError, StatusCode, quoteName } from './errors.js';
import { HeldNumbers } from './held.js';
import type { Timestamp } from './proto.js';
import { Range } from './range.js';
import type { Previous, RangeSource, ReturnOutcome } from './source.js';
import type { CallOptions, HiloId } from './types.js';

/** What every cache of one client shares: where ranges come from, and the client's options. */
export interface CacheContext {
  readonly source: RangeSource;
  readonly prefetchAt: number;
  /** The client's monotonic clock, in milliseconds. */
  readonly now: () => number;
  /** How long a caller may wait for a number in all (its fetches succeeding while others drain them). */
  readonly waitBoundMs: number;
  /** Where a failed return is reported. */
  readonly log: (line: string) => void;
  /**
   * Drops `cache`, which forgot itself (forgetIfUnused), from the client's
   * table if it is still there, keeping its counters in the client's
   * totals: once, whoever calls first.
   */
  readonly drop: (cache: RangeCache) => void;
  /** The client's cache of `collection`, made (and kept) if it has none. */
  readonly lookup: (collection: string) => RangeCache;
}

/** Thrown by wait() of a forgotten cache, and caught in waitAndTake: never seen outside. */
const FORGOTTEN: unique symbol = Symbol('forgotten');

/** The counters of one collection (HiloStats' names). */
export interface CacheCounters {
  calls_waited: number;
  ranges_fetched: number;
  ranges_prefetched: number;
  returns_applied: number;
  returns_refused: number;
  returns_failed: number;
}

/** Every counter at 0: a cache's at its start, and the client's for the caches it dropped. */
export function zeroCounters(): CacheCounters {
  return { calls_waited: 0, ranges_fetched: 0, ranges_prefetched: 0, returns_applied: 0, returns_refused: 0, returns_failed: 0 };
}

/**
 * What takeUnused retired and endReturn settles: each (range, last) in the
 * order it must reach its node, the range fetched ahead whole first; `pair`
 * when they are two adjacent ranges of one node (they go in one call).
 */
export interface Unused {
  returns: { range: Range; last: bigint }[];
  pair: boolean;
}

/** Takes a number of a collection in one form, if its range has one left. */
type Take<T> = (c: RangeCache) => T | undefined;
const takeId: Take<HiloId> = (c) => c.tryId();
const takeDocumentId: Take<string> = (c) => c.tryDocumentId();

/** How many numbers of `r` were handed out. */
function taken(r: Range): number {
  return Number(r.takenUpTo() - r.low + 1n);
}

export class RangeCache {
  readonly name: string;
  /** collection + separator. */
  readonly prefix: string;
  cur: Range | null = null;
  ahead: Range | null = null;
  /** The fetch or return in flight, shared by every waiter; null when none. */
  private inflight: Promise<void> | null = null;
  /** Settles `inflight` while a return is in flight (takeUnused .. endReturn). */
  private endInflight: (() => void) | null = null;
  /** Set by retire(): no range is fetched from then on, and a caller that finds no number gets FAILED_PRECONDITION. Also set, with `forgotten`, by forgetIfUnused. */
  private closed = false;
  /**
   * Set by forgetIfUnused: the client drops this cache (it never received a
   * range), which never fetches or hands out a number again; a caller that
   * finds it looks the collection up again.
   */
  forgotten = false;
  private previous: Previous = { size: 0n, rangeAt: null, max: 0n };
  /**
   * Per node tag: the numbers of this collection the client holds or handed
   * out from that node's ranges; after a return, less that range's numbers
   * above the last one used (CONTRACT.md R11).
   */
  private readonly held = new HeldNumbers();
  /** Per node tag: the highest number handed out of that node's ranges no longer current (absent: none). */
  private readonly used = new Map<string, bigint>();
  readonly counters: CacheCounters = zeroCounters();
  /** Failed fetches and returns, by status code. */
  readonly errors = new Map<number, number>();
  // The runway's window, moved only by use(): it began when the range
  // before the current one came into use (the current one, for the first),
  // with the numbers taken of that earlier range.
  private usedSince = 0;
  private windowStart = 0;
  private windowTakenBefore = 0;
  private readonly ctx: CacheContext;

  constructor(name: string, separator: string, ctx: CacheContext) {
    this.name = name;
    this.prefix = name + separator;
    this.ctx = ctx;
  }

  /** As HiloClient.nextId on this collection. */
  nextId(options?: CallOptions): Promise<HiloId> {
    return this.next(takeId, options);
  }

  /** As HiloClient.nextDocumentId on this collection. */
  nextDocumentId(options?: CallOptions): Promise<string> {
    return this.next(takeDocumentId, options);
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

  /** A number taken at once while the range lasts, else after waiting for a range. */
  private next<T>(take: Take<T>, options: CallOptions | undefined): Promise<T> {
    const signal = options?.signal;
    if (signal?.aborted === true) {
      this.forgetAfterFailure();
      return Promise.reject(aborted(this.name, signal));
    }
    const id = take(this);
    if (id !== undefined) return Promise.resolve(id);
    return this.waitAndTake(take, signal);
  }

  /**
   * Waits for a range and takes a number of it; on a forgotten cache, goes
   * on with the collection's cache now. A call waits (calls_waited) and is
   * bounded once, whichever caches it went through.
   */
  private async waitAndTake<T>(take: Take<T>, signal: AbortSignal | undefined): Promise<T> {
    let c: RangeCache = this;
    let started: number | null = null;
    let counted = false;
    for (;;) {
      try {
        started = await c.wait(signal, started, counted);
        counted = true;
      } catch (e) {
        if (e !== FORGOTTEN) {
          c.forgetAfterFailure();
          throw e;
        }
        c = c.successor();
      }
      const id = take(c);
      if (id !== undefined) return id;
    }
  }

  /**
   * Closes the cache for good if it never received a range and no fetch or
   * return is in flight (its fetches failed: a name the server refuses,
   * say), so that the client can drop it and a caller naming many such
   * collections does not grow the client. It then fetches nothing and hands
   * nothing out (it holds no range); a caller that finds it looks the
   * collection up again. True if it did. A cache that ever received a range
   * is never forgotten.
   */
  forgetIfUnused(): boolean {
    if (this.counters.ranges_fetched !== 0 || this.inflight !== null || this.closed) return false;
    if (this.cur !== null || this.ahead !== null) return false; // held no range: unreachable
    this.closed = true;
    this.forgotten = true;
    return true;
  }

  /** After a call on this cache failed: forgets it if it never received a range (forgetIfUnused), and has the client drop it. */
  private forgetAfterFailure(): void {
    if (this.forgetIfUnused()) this.ctx.drop(this);
  }

  /**
   * For a caller that found this cache forgotten (a CollectionHandle asks
   * the client itself, HandleTable): has the client drop it, if no one did
   * yet, and gives the collection's cache now (a new one if the client has
   * none).
   */
  private successor(): RangeCache {
    this.ctx.drop(this);
    return this.ctx.lookup(this.name);
  }

  /** Waits until a number may be left again: joins the operation in flight, or starts a fetch. Throws the fetch's error, or FORGOTTEN (before counting anything). */
  private async wait(signal: AbortSignal | undefined, started: number | null, counted: boolean): Promise<number> {
    // Counts nothing here: the counters of a forgotten cache are the client's.
    if (this.forgotten) throw FORGOTTEN;
    // A call the closed client fails waited for no range (CONTRACT.md R14).
    if (this.closed) {
      throw new HiloError(StatusCode.FAILED_PRECONDITION, `client is closed; no more IDs of ${quoteName(this.name)}`);
    }
    const now = this.ctx.now();
    if (started === null) started = now;
    if (!counted) this.counters.calls_waited++;
    if (signal?.aborted) throw aborted(this.name, signal);
    // A caller whose fetches keep succeeding while others drain them still stops.
    const bound = this.ctx.waitBoundMs;
    if (now - started > bound) {
      throw new HiloError(
        StatusCode.DEADLINE_EXCEEDED,
        `waited over ${bound} ms for a number of ${quoteName(this.name)}; other callers took every one`,
      );
    }
    if (this.inflight === null) this.startFetch(false);
    await untilAborted(this.inflight!, signal, this.name);
    return started;
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
      if (n === r.trigger) this.prefetch();
      return n;
    }
    const n = r.nextBig;
    r.nextBig = n + 1n;
    if (n === r.triggerBig) this.prefetch();
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
    const now = this.ctx.now();
    if (this.cur !== null) {
      this.windowStart = this.usedSince;
      this.windowTakenBefore = taken(this.cur);
      this.retireCurrent();
    } else {
      this.windowStart = now;
      this.windowTakenBefore = 0;
    }
    this.usedSince = now;
    this.cur = range;
  }

  /** Drops the current range (no number of it is handed out from here on), remembering what was. */
  private retireCurrent(): void {
    const r = this.cur!;
    // A range none was taken of says nothing: its low - 1 may lie above
    // numbers other clients handed back since.
    const upTo = r.takenUpTo();
    if (upTo >= r.low && upTo > (this.used.get(r.tag) ?? 0n)) this.used.set(r.tag, upTo);
    this.cur = null;
  }

  /** Starts the background fetch of the next range, unless an operation is in flight or a range waits ahead. */
  private prefetch(): void {
    if (this.inflight !== null || this.ahead !== null || this.closed) return;
    this.startFetch(true);
  }

  private startFetch(prefetch: boolean): void {
    const p = (async () => {
      try {
        this.place(await this.fetch(prefetch));
      } catch (e) {
        // A failed prefetch is nobody's error: the next caller on a dry
        // range fetches (and reports) by itself.
        if (!prefetch) throw e;
      } finally {
        this.inflight = null;
      }
    })();
    // Waiters get the error; with none left (all aborted) it must not surface as unhandled.
    // This runs before any waiter sees it: a cache that never received a range is forgotten
    // here, even when every caller gave up waiting.
    p.catch(() => this.forgetAfterFailure());
    this.inflight = p;
  }

  /** One range from the source; from here on it is this client's, and the next request reports it. */
  private async fetch(prefetch: boolean): Promise<Range> {
    let issued;
    try {
      issued = await this.ctx.source.next(this.name, this.previous, this.held);
    } catch (e) {
      this.countError(e instanceof HiloError ? e.code : StatusCode.UNKNOWN);
      throw e;
    }
    const { low, high, tag } = issued;
    this.counters.ranges_fetched++;
    if (prefetch) this.counters.ranges_prefetched++;
    // The next request reports this range (CONTRACT.md R4), whichever node issued it: after a
    // failover, a node far behind would refuse another node's high on every request (R17).
    this.previous = { size: high - low + 1n, rangeAt: issued.rangeAt, max: high };
    const range = new Range(low, high, tag, issued.token, issued.target, this.ctx.prefetchAt);
    this.held.add(tag, low, high);
    return range;
  }

  /** Puts a fetched range where callers find it. */
  private place(range: Range): void {
    if (this.cur === null || this.cur.dry()) {
      this.use(range);
    } else if (this.ahead === null) {
      this.ahead = range;
    } else {
      // Unreachable: one fetch at a time, and none while a range waits ahead.
      throw new HiloError(StatusCode.INTERNAL, `collection ${quoteName(this.name)} already holds two ranges`);
    }
  }

  /** No range is fetched from now on, and a caller that finds no number gets FAILED_PRECONDITION (the client closes). */
  retire(): void {
    this.closed = true;
  }

  /**
   * Once the operation in flight has settled: retires the current range and
   * the one fetched ahead (no number of them is handed out from here on) and
   * says what to hand back, the range fetched ahead whole (last = low - 1),
   * then the current range's unused tail; null when nothing is left. Callers
   * that find no number wait, as for a fetch, until endReturn, which must
   * follow a non-null answer.
   */
  async takeUnused(): Promise<Unused | null> {
    while (this.inflight !== null) await this.inflight.catch(() => {});
    const cur = this.cur;
    const ahead = this.ahead;
    const unused: Unused = { returns: [], pair: false };
    if (ahead !== null) {
      unused.returns.push({ range: ahead, last: ahead.low - 1n });
      // Issued right above the current range by the same node: its whole
      // return makes the current range the last issued again, so the tail
      // can come back too, in the same call.
      unused.pair = cur !== null && ahead.target === cur.target && ahead.low === cur.high + 1n;
      this.ahead = null;
    }
    if (cur !== null) {
      this.retireCurrent();
      if (!cur.dry()) unused.returns.push({ range: cur, last: cur.takenUpTo() });
    }
    if (unused.returns.length < 2) unused.pair = false;
    if (unused.returns.length === 0) return null;
    this.inflight = new Promise<void>((resolve) => (this.endInflight = resolve));
    return unused;
  }

  /** Ends what takeUnused began: counts and logs each outcome (outcomes[k] is that of unused.returns[k]), lowers the numbers held, lets callers go on. */
  endReturn(unused: Unused, outcomes: readonly ReturnOutcome[]): void {
    const outcome = (k: number): ReturnOutcome =>
      outcomes[k] ?? new HiloError(StatusCode.INTERNAL, 'the range source gave no outcome');
    // A refusal with Max already at `last` is a retried copy of a return
    // that applied (its reply was lost): the numbers are back all the same.
    const back = (k: number): boolean => {
      const o = outcome(k);
      return !(o instanceof HiloError) && (o.applied || o.max === unused.returns[k].last);
    };
    // A pair's tail comes back only after the range above it did.
    const tailBack = unused.pair && back(1);
    unused.returns.forEach(({ range, last }, k) => {
      const o = outcome(k);
      if (k === 0 && (back(k) || tailBack || o instanceof HiloError)) {
        // The first return is of the range fetched last, the one the next
        // request reports (CONTRACT.md R4): unless the node refused it,
        // last_max becomes the highest number handed out of that node's
        // ranges, at or below its Max for ever, so the node skips none of
        // the numbers other clients handed back meanwhile. Refused, the
        // range's high stays (at or below Max: nothing applied).
        this.previous = { ...this.previous, max: this.used.get(range.tag) ?? 0n };
      }
      if (back(k) || (k === 0 && tailBack)) {
        this.counters.returns_applied++;
      } else if (o instanceof HiloError) {
        this.counters.returns_failed++;
        this.countError(o.code);
        this.ctx.log(`hilo: returning numbers ${last + 1n}-${range.high} of collection ${quoteName(this.name)} failed: ${o.codeName}: ${o.message}`);
      } else {
        this.counters.returns_refused++;
      }
      // Whatever the answer, this range is never used again, so its numbers
      // above `last` are no longer held (a return of unknown outcome may
      // have applied, and then the node's next range rightly starts right
      // after `last`).
      this.held.remove(range.tag, last + 1n, range.high);
    });
    const end = this.endInflight;
    this.endInflight = null;
    this.inflight = null;
    end?.();
  }

  /**
   * How many milliseconds the numbers this collection holds (the rest of
   * the current range and a range fetched ahead) last at the rate it handed
   * them out since its window began; undefined when it holds no range,
   * handed out no number in the window, or no time passed in it.
   */
  runwayMs(now: number): number | undefined {
    const r = this.cur;
    if (r === null || this.closed) return undefined;
    const done = taken(r);
    let held = Number(r.high - r.low + 1n) - done;
    if (this.ahead !== null) held += Number(this.ahead.high - this.ahead.low + 1n);
    const handedOut = this.windowTakenBefore + done;
    const window = now - this.windowStart;
    if (handedOut <= 0 || window <= 0) return undefined;
    return (window * held) / handedOut;
  }

  private countError(code: number): void {
    this.errors.set(code, (this.errors.get(code) ?? 0) + 1);
  }
}

export function aborted(collection: string, signal: AbortSignal): HiloError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new HiloError(StatusCode.CANCELLED, `wait for a number of ${quoteName(collection)} aborted: ${reason}`, {
    cause: signal.reason,
  });
}

/** `p`, or a CANCELLED rejection as soon as `signal` aborts. */
function untilAborted(p: Promise<void>, signal: AbortSignal | undefined, collection: string): Promise<void> {
  if (signal === undefined) return p;
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(aborted(collection, signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
