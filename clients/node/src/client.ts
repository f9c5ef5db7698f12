// HiloClient: document IDs from a hilo service, without a round trip per ID.
//
// The client keeps one range of numbers per collection, obtained from a hilo
// server with NextRange, and hands its numbers out locally. Each number keeps
// the tag of the node that issued its range, so IDs stay unique across nodes:
//
//   const ids = new HiloClient({ targets: ['127.0.0.1:50051'] });
//   await ids.nextDocumentId('orders');   // 'orders/1-A'
//   await ids.nextId('orders');           // { number: 2n, tag: 'A' }
//   await ids.close();                    // hands the unused numbers back
//
// JavaScript runs one caller at a time, so "concurrent" here means many async
// callers whose awaits interleave. While a range lasts, taking a number is one
// increment and a resolved promise: no I/O, no timer. When a fifth of a range
// is used (prefetchAt) the next one is fetched in the background; when a
// range runs dry anyway, exactly one NextRange goes out and every caller of
// that collection awaits the same promise, which is cleared when it settles
// (so after a failure the next caller asks again); each collection's
// RangeCache does that through a RangeSource, never reaching back here but
// to be dropped: a collection that never received a range is forgotten
// after a failed call (a name the server refuses, say), so that a caller
// naming many such collections does not grow the client; its counters stay
// in the client's totals.
// close() hands each collection's unused numbers back to the node that
// issued them and resolves once every return has been answered or has
// failed; returnUnusedRanges() does the same and keeps the client.

import * as grpc from '@grpc/grpc-js';
import { HiloError, StatusCode, statusCodeName } from './errors.js';
import { GrpcRangeSource } from './grpc_source.js';
import { CollectionHandle } from './handle.js';
import type { HandleTable } from './handle.js';
import { hiloStubConstructor } from './proto.js';
import { RangeCache, zeroCounters } from './range_cache.js';
import type { CacheContext, CacheCounters, Unused } from './range_cache.js';
import type { ReturnItem, ReturnOutcome } from './source.js';
import { Transport } from './transport.js';
import type { CallOptions, HiloClientOptions, HiloId, HiloStats } from './types.js';

/**
 * A hilo client: IDs for any number of collections, from one or more hilo
 * servers. Safe to share among all the async callers of a process.
 */
export class HiloClient {
  private readonly separator: string;
  private readonly transport: Transport;
  private readonly source: GrpcRangeSource;
  /** What every collection's cache shares. */
  private readonly context: CacheContext;
  /** Per collection; one that never received a range is dropped after a failed call (RangeCache.forgetIfUnused). */
  private readonly caches = new Map<string, RangeCache>();
  /**
   * Per collection in `caches` only: the handle collection() gives for the
   * name (the first made or called while the client keeps the collection);
   * dropped with its cache. A handle made for a name the client does not
   * keep is kept nowhere until its first call.
   */
  private readonly handles = new Map<string, CollectionHandle>();
  /** What a handle starts on when the client keeps no cache of its name: holds nothing, is forgotten, never in `caches`. */
  private readonly placeholder: RangeCache;
  /** The client as its handles see it. */
  private readonly table: HandleTable = {
    bind: (h, was) => this.bind(h, was, true)!,
    find: (h, was) => this.bind(h, was, false),
  };
  /** The counters of the caches dropped from `caches`, which stats() goes on reporting. */
  private readonly dropped: CacheCounters = zeroCounters();
  private readonly droppedErrors = new Map<number, number>();
  private closing = false;
  /** The last hand-back of unused ranges (returnUnused), settled or not. */
  private handingBack: Promise<void> = Promise.resolve();
  private closed: Promise<void> | null = null;

  /**
   * Checks the options and makes a channel per target. Connecting is lazy,
   * so this succeeds with no server running. Throws HiloError
   * INVALID_ARGUMENT for bad options.
   */
  constructor(options: HiloClientOptions) {
    const targets = options?.targets;
    if (!Array.isArray(targets) || targets.length === 0) {
      throw new HiloError(StatusCode.INVALID_ARGUMENT, 'targets is empty; give at least one "host:port"');
    }
    for (const t of targets) {
      if (typeof t !== 'string' || t.length === 0) {
        throw new HiloError(StatusCode.INVALID_ARGUMENT, `target ${JSON.stringify(t)} is not a non-empty string`);
      }
    }
    const separator = options.separator ?? '/';
    checkSeparator(separator);
    const deadline = options.rpcDeadlineMs ?? 5000;
    if (!(Number.isFinite(deadline) && deadline > 0)) {
      throw new HiloError(StatusCode.INVALID_ARGUMENT, `rpcDeadlineMs is ${deadline}; use a positive number of milliseconds`);
    }
    const prefetchAt = options.prefetchAt ?? 0.2;
    if (!(prefetchAt >= 0 && prefetchAt < 1)) {
      throw new HiloError(StatusCode.INVALID_ARGUMENT, `prefetchAt is ${prefetchAt}; use 0 (off) or a share in (0, 1)`);
    }
    this.separator = separator;
    const now = options.clock ?? (() => performance.now());
    const credentials = options.credentials ?? makeCredentials(options.tls);
    // An ID service sits under every insert: come back within a second of a
    // server's return, not after grpc-js's back-off of up to 2 minutes
    // (CONTRACT.md R18). The caller's channelOptions may say otherwise.
    const channelOptions: grpc.ChannelOptions = {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1000,
      ...options.channelOptions,
    };
    if (options.tls?.serverName !== undefined) {
      channelOptions['grpc.ssl_target_name_override'] = options.tls.serverName;
      channelOptions['grpc.default_authority'] = options.tls.serverName;
    }
    const Stub = hiloStubConstructor();
    const copy = [...targets];
    this.transport = new Transport(
      copy,
      copy.map((t) => new Stub(t, credentials, channelOptions)),
      deadline,
      now,
    );
    this.source = new GrpcRangeSource(this.transport);
    this.context = {
      source: this.source,
      prefetchAt,
      now,
      waitBoundMs: deadline * (copy.length + 1),
      log: options.log ?? ((line) => process.stderr.write(line + '\n')),
      drop: (cache) => this.drop(cache),
      lookup: (collection) => this.cache(collection),
    };
    this.placeholder = new RangeCache('', separator, this.context);
    this.placeholder.forgetIfUnused(); // a handle's first call on it looks its collection up
  }

  /** The next number of `collection` and its node tag. Errors as nextDocumentId. */
  nextId(collection: string, options?: CallOptions): Promise<HiloId> {
    return this.cache(collection).nextId(options);
  }

  /**
   * "collection<separator>number-tag", e.g. "orders/10-A". Resolves without
   * I/O while the collection's range lasts. Rejects with HiloError:
   * INVALID_ARGUMENT for a bad collection name (from the server);
   * UNAVAILABLE naming every target when none answered; INTERNAL naming every
   * target when the replies broke the contract; CANCELLED when `signal`
   * aborted the wait; FAILED_PRECONDITION after close(); otherwise the
   * server's status.
   */
  nextDocumentId(collection: string, options?: CallOptions): Promise<string> {
    return this.cache(collection).nextDocumentId(options);
  }

  /**
   * A handle on one collection: the name is looked up once, for hot loops.
   * Making one keeps nothing in the client: a collection the client does
   * not keep yet is looked up (and kept) on the handle's first call. While
   * the client keeps the collection, the same handle every time; before
   * (a handle made but never called), or after the client forgot the
   * collection (it never received a range, and a call failed), a new one.
   * Every handle keeps working.
   */
  collection(name: string): CollectionHandle {
    const h = this.handles.get(name);
    if (h !== undefined) return h;
    const c = this.caches.get(name);
    if (c === undefined) return new CollectionHandle(name, this.table, this.placeholder);
    const made = new CollectionHandle(name, this.table, c);
    if (!this.closing) this.handles.set(name, made);
    return made;
  }

  /** The counters so far (a copy), and each collection's runway. */
  stats(): HiloStats {
    const stats: HiloStats = {
      calls_waited: 0,
      ranges_fetched: 0,
      ranges_prefetched: 0,
      failovers: this.source.failovers,
      returns_applied: 0,
      returns_refused: 0,
      returns_failed: 0,
      errors: {},
      runway_ms: {},
    };
    const add = (counters: CacheCounters, errors: Map<number, number>) => {
      for (const [key, n] of Object.entries(counters)) stats[key as keyof CacheCounters] += n;
      for (const [code, n] of errors) {
        const codeName = statusCodeName(code);
        stats.errors[codeName] = (stats.errors[codeName] ?? 0) + n;
      }
    };
    add(this.dropped, this.droppedErrors);
    const now = this.context.now();
    for (const [name, c] of this.caches) {
      add(c.counters, c.errors);
      const ms = c.runwayMs(now);
      if (ms !== undefined) stats.runway_ms[name] = ms;
    }
    return stats;
  }

  /**
   * Hands the unused numbers of every collection back to the node that
   * issued them, as close() does, and keeps the client: the next call on a
   * collection fetches a new range. No number of a range handed back is
   * handed out again, whatever the node answered; callers that run out of
   * numbers meanwhile wait for the returns, then for a new range. Resolves
   * once every return has been answered or has failed (failures are logged
   * and counted, never thrown); rejects with FAILED_PRECONDITION after
   * close(). Useful before a long idle spell, so that the next process to
   * ask continues right after the last number this one used.
   */
  returnUnusedRanges(): Promise<void> {
    if (this.closing) {
      return Promise.reject(new HiloError(StatusCode.FAILED_PRECONDITION, 'client is closed; it holds no ranges to hand back'));
    }
    return this.returnUnused();
  }

  /**
   * Hands the unused numbers of every collection back to the node that
   * issued them, then closes the channels. For each collection, the range
   * fetched ahead goes back whole and then the unused tail of the current
   * one, as one adjacent pair in one ReturnRanges call (later range first)
   * when both came from the same node, each with its range token; a return
   * is retried on UNAVAILABLE or DEADLINE_EXCEEDED within rpcDeadlineMs, and
   * sent as single ReturnRange calls to a node that answers UNIMPLEMENTED.
   * Resolves once every return has been answered or has failed (failures
   * are logged, never thrown). Calling it again returns the same promise.
   * No ID is handed out after the returns were taken.
   */
  close(): Promise<void> {
    if (this.closed === null) {
      this.closing = true;
      // From here on no range is fetched; a fetch in flight lands, and its range goes back too.
      for (const c of this.caches.values()) c.retire();
      this.closed = this.returnUnused().then(() => this.transport.close());
    }
    return this.closed;
  }

  /** `await using ids = new HiloClient(...)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private cache(name: string): RangeCache {
    let c = this.caches.get(name);
    if (c === undefined) {
      c = new RangeCache(name, this.separator, this.context);
      if (this.closing) {
        // Its calls fail (FAILED_PRECONDITION): a closed client keeps no new collection.
        c.retire();
        return c;
      }
      this.caches.set(name, c);
    }
    return c;
  }

  /**
   * For handle `h`, whose cache `was` is forgotten (or the placeholder): the
   * client's cache of its collection now, made (kept unless closed) if the
   * client has none and `make`, else undefined; drops `was` if the table
   * still holds it. `h` becomes the collection's handle if it has none.
   */
  private bind(h: CollectionHandle, was: RangeCache, make: boolean): RangeCache | undefined {
    if (was !== this.placeholder) this.drop(was); // the placeholder is in no table, whatever its name
    const c = make ? this.cache(h.name) : this.caches.get(h.name);
    if (c !== undefined && !this.closing && this.caches.get(h.name) === c && !this.handles.has(h.name)) {
      this.handles.set(h.name, h);
    }
    return c;
  }

  /**
   * Drops `c`, which forgot itself (it never received a range), if the
   * table still holds it, and its handle; its counters go to the totals
   * stats() reports. Once, whoever calls first: a caller that finds `c`
   * forgotten later calls it too.
   */
  private drop(c: RangeCache): void {
    if (this.caches.get(c.name) !== c) return;
    this.caches.delete(c.name);
    this.handles.delete(c.name);
    for (const [key, n] of Object.entries(c.counters)) this.dropped[key as keyof CacheCounters] += n;
    for (const [code, n] of c.errors) this.droppedErrors.set(code, (this.droppedErrors.get(code) ?? 0) + n);
  }

  /**
   * Every collection's unused ranges, in one returnMany, after the hand-back
   * before it has ended. One at a time: two at once could each take one
   * cache and wait for the other's, and neither would ever end.
   */
  private returnUnused(): Promise<void> {
    const run = this.handingBack.then(() => this.returnUnusedNow());
    this.handingBack = run.catch(() => undefined);
    return run;
  }

  /**
   * Every collection's unused ranges, in one returnMany; each cache settles
   * its own. A cache first lets the fetch or return in flight end, so a
   * hand-back racing calls never hands a range back twice.
   */
  private async returnUnusedNow(): Promise<void> {
    const caches = [...this.caches.values()];
    const taken = await Promise.all(caches.map((c) => c.takeUnused()));
    const items: ReturnItem[] = [];
    const firsts: number[] = [];
    caches.forEach((c, i) => {
      const unused = taken[i];
      firsts.push(items.length);
      if (unused === null) return;
      unused.returns.forEach(({ range, last }, k) => {
        items.push({ collection: c.name, range, last, withNext: unused.pair && k === 0 });
      });
    });
    let outcomes: ReturnOutcome[] = [];
    try {
      if (items.length > 0) outcomes = await this.source.returnMany(items);
    } finally {
      // Every taken cache ends its return, so no caller waits for ever.
      caches.forEach((c, i) => {
        const unused: Unused | null = taken[i];
        if (unused !== null) c.endReturn(unused, outcomes.slice(firsts[i], firsts[i] + unused.returns.length));
      });
    }
  }
}


/**
 * CONTRACT.md R12: one character, neither '|', nor '-' (the number is read
 * between the last separator and the last '-', which a '-' separator makes
 * ambiguous), nor a digit (it would run into the number).
 */
function checkSeparator(separator: string): void {
  const rule = "use one character other than '|', '-' and 0-9";
  if (typeof separator !== 'string' || [...separator].length !== 1) {
    throw new HiloError(StatusCode.INVALID_ARGUMENT, `separator ${JSON.stringify(separator)} is not one character; ${rule}`);
  }
  const code = separator.codePointAt(0) ?? 0;
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) {
    throw new HiloError(
      StatusCode.INVALID_ARGUMENT,
      `separator U+${code.toString(16).toUpperCase().padStart(4, '0')} is a control character; a document ID holds none (a NUL would cut it short in C strings and many stores); ${rule}`,
    );
  }
  if (code >= 0xd800 && code <= 0xdfff) {
    throw new HiloError(StatusCode.INVALID_ARGUMENT, `separator is half a surrogate pair, not a character; ${rule}`);
  }
  if (separator === '|') {
    throw new HiloError(StatusCode.INVALID_ARGUMENT, `separator '|' is reserved; ${rule}`);
  }
  if (separator === '-') {
    throw new HiloError(
      StatusCode.INVALID_ARGUMENT,
      `separator '-' would make the number ambiguous (it is read between the last separator and the last '-'); ${rule}`,
    );
  }
  if (separator >= '0' && separator <= '9') {
    throw new HiloError(StatusCode.INVALID_ARGUMENT, `separator '${separator}' is a digit, which would run into the number; ${rule}`);
  }
}

function makeCredentials(tls: HiloClientOptions['tls']): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  const buf = (v: Buffer | string | undefined) => (v === undefined ? null : Buffer.isBuffer(v) ? v : Buffer.from(v));
  return grpc.credentials.createSsl(buf(tls.ca), buf(tls.key), buf(tls.cert));
}
