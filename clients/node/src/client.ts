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
// (so after a failure the next caller asks again). close() hands each
// collection's unused numbers back to the node that issued them and resolves
// once every return has been answered or has failed.

import * as grpc from '@grpc/grpc-js';
import { HiloError, StatusCode, statusCodeName } from './errors.js';
import type {
  NextRangeRequest,
  NextRangeResponse,
  ReturnRangeRequest,
  ReturnRangeResponse,
  ReturnRangeResult,
  ReturnRangesResponse,
  Timestamp,
} from './proto.js';
import { hiloStubConstructor } from './proto.js';
import { Collection } from './range_cache.js';
import { CollectionHandle, aborted, untilAborted } from './handle.js';
import { Range } from './range.js';
import { Transport } from './transport.js';
import type { CallOptions, HiloClientOptions, HiloId, HiloStats } from './types.js';

const NODE_TAG = /^[A-Z0-9]{1,4}$/;
// The most numbers a client takes in one range (CONTRACT.md R11): a server's
// ranges are at most its --max_range_size (2^20 by default); a bigger one is
// a tampered reply or a broken server, whose high echoed as last_max every
// node would then refuse.
const MAX_RANGE_SIZE = 1n << 32n;

/** Within google.protobuf.Timestamp's range, 0001-01-01 to 9999-12-31: only such a range_at is echoed. */
function isValidTimestamp(t: Timestamp): boolean {
  let seconds: bigint;
  try {
    seconds = BigInt(t.seconds);
  } catch {
    return false;
  }
  const nanos = t.nanos ?? 0;
  return (
    seconds >= -62135596800n &&
    seconds <= 253402300799n &&
    Number.isInteger(nanos) &&
    nanos >= 0 &&
    nanos <= 999_999_999
  );
}
const MAX_BATCH_ITEMS = 1000;
const MAX_BATCH_BYTES = 60 * 1024;


/** What one item of a return sends, and to whom. */
interface ReturnItem {
  collection: string;
  range: Range;
  last: bigint;
}

/**
 * A hilo client: IDs for any number of collections, from one or more hilo
 * servers. Safe to share among all the async callers of a process.
 */
export class HiloClient {
  private readonly separator: string;
  private readonly rpcDeadlineMs: number;
  private readonly prefetchAt: number;
  private readonly log: (line: string) => void;
  private readonly now: () => number;
  private readonly transport: Transport;
  private readonly collections = new Map<string, Collection>();
  private closing = false;
  private closed: Promise<void> | null = null;
  private readonly counters: HiloStats = {
    calls_waited: 0,
    ranges_fetched: 0,
    ranges_prefetched: 0,
    failovers: 0,
    returns_applied: 0,
    returns_refused: 0,
    returns_failed: 0,
    errors: {},
    runway_ms: {},
  };

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
    this.rpcDeadlineMs = deadline;
    this.prefetchAt = prefetchAt;
    this.log = options.log ?? ((line) => process.stderr.write(line + '\n'));
    this.now = options.clock ?? (() => performance.now());
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
      this.now,
    );
  }

  /** The next number of `collection` and its node tag. Errors as nextDocumentId. */
  nextId(collection: string, options?: CallOptions): Promise<HiloId> {
    return this.collection(collection).nextId(options);
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
    return this.collection(collection).nextDocumentId(options);
  }

  /** A handle on one collection: the name is looked up once, for hot loops. */
  collection(name: string): CollectionHandle {
    let c = this.collections.get(name);
    if (c === undefined) {
      c = new Collection(this, name, this.separator);
      this.collections.set(name, c);
    }
    return new CollectionHandle(this, c);
  }

  /** The counters so far (a copy), and each collection's runway. */
  stats(): HiloStats {
    const runway: Record<string, number> = {};
    const now = this.now();
    for (const [name, c] of this.collections) {
      const ms = c.runwayMs(now);
      if (ms !== undefined) runway[name] = ms;
    }
    return { ...this.counters, errors: { ...this.counters.errors }, runway_ms: runway };
  }

  /** The client's monotonic clock, in milliseconds. @internal */
  _now(): number {
    return this.now();
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
    if (this.closed === null) this.closed = this.closeNow();
    return this.closed;
  }

  /** `await using ids = new HiloClient(...)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---- internals (the leading underscore: used by Collection and CollectionHandle only) ----

  /** Waits until `c` may have a number again: joins or starts its fetch. Throws the fetch's error. */
  async _wait(c: Collection, signal: AbortSignal | undefined, started: number | null, counted: boolean): Promise<number> {
    if (started === null) started = this.now();
    if (!counted) this.counters.calls_waited++;
    if (this.closing || c.retired) {
      throw new HiloError(StatusCode.FAILED_PRECONDITION, `client is closed; no more IDs of "${c.name}"`);
    }
    if (signal?.aborted) throw aborted(c.name, signal);
    // A caller whose fetches keep succeeding while others drain them still stops.
    const bound = this.rpcDeadlineMs * (this.transport.targets.length + 1);
    if (this.now() - started > bound) {
      throw new HiloError(
        StatusCode.DEADLINE_EXCEEDED,
        `waited over ${bound} ms for a number of "${c.name}"; other callers took every one`,
      );
    }
    if (c.inflight === null) this.startFetch(c, false);
    await untilAborted(c.inflight!, signal, c.name);
    return started;
  }

  /** Starts the background fetch of the next range of `c`, unless one is out or waiting. */
  _prefetch(c: Collection): void {
    if (c.inflight !== null || c.ahead !== null || this.closing || c.retired) return;
    this.startFetch(c, true);
  }

  private startFetch(c: Collection, prefetch: boolean): void {
    const p = (async () => {
      try {
        const range = await this.fetch(c, prefetch);
        c.place(range);
      } catch (e) {
        // A failed prefetch is nobody's error: the next caller on a dry
        // range fetches (and reports) by itself.
        if (!prefetch) throw e;
      } finally {
        c.inflight = null;
      }
    })();
    // Waiters get the error; with none left (all aborted) it must not surface as unhandled.
    p.catch(() => {});
    c.inflight = p;
  }

  /** One NextRange (Transport.nextRange: failover across targets), its reply checked against R11. */
  private async fetch(c: Collection, prefetch: boolean): Promise<Range> {
    const request: NextRangeRequest = {
      collection: c.name,
      last_size: c.lastSize.toString(),
      last_range_at: c.lastRangeAt,
      last_max: c.lastMax.toString(),
    };
    let accepted;
    try {
      accepted = await this.transport.nextRange(request, (r) => this.check(c, r));
    } catch (e) {
      this.countError((e as HiloError).code);
      throw e;
    }
    const { low, high } = accepted.value;
    const response = accepted.response;
    if (accepted.failedOver) this.counters.failovers++;
    this.counters.ranges_fetched++;
    if (prefetch) this.counters.ranges_prefetched++;
    c.lastSize = high - low + 1n;
    c.lastRangeAt = response.range_at;
    if (high > c.lastMax) c.lastMax = high;
    c.lastHighByTag.set(response.node_tag, high);
    return new Range(low, high, response.node_tag, response.range_token, accepted.target, this.prefetchAt);
  }

  /** The range's bounds, or what breaks the contract in a NextRange reply. */
  private check(c: Collection, r: NextRangeResponse): { low: bigint; high: bigint } | string {
    let low: bigint, high: bigint;
    try {
      low = BigInt(r.low);
      high = BigInt(r.high);
    } catch {
      return `NextRange replied with the unreadable range [${r.low}, ${r.high}]`;
    }
    if (low < 1n || high < low) return `NextRange replied with the invalid range [${low}, ${high}]`;
    if (high - low >= MAX_RANGE_SIZE) {
      return `NextRange replied with the range [${low}, ${high}] of ${high - low + 1n} numbers; a client takes at most ${MAX_RANGE_SIZE} in one range`;
    }
    if (r.range_at != null && !isValidTimestamp(r.range_at)) {
      return `NextRange replied with range_at ${r.range_at.seconds} s ${r.range_at.nanos} ns, which is not a valid Timestamp (0001-01-01 to 9999-12-31)`;
    }
    if (typeof r.node_tag !== 'string' || !NODE_TAG.test(r.node_tag)) {
      return `NextRange replied with node tag ${JSON.stringify(r.node_tag)}, which is not 1-4 characters of A-Z and 0-9`;
    }
    const previous = c.lastHighByTag.get(r.node_tag);
    if (previous !== undefined && low <= previous) {
      return `NextRange replied with range [${low}, ${high}] of "${c.name}" from node ${r.node_tag}, which does not lie above the last one it gave this client (up to ${previous})`;
    }
    return { low, high };
  }

  private async closeNow(): Promise<void> {
    this.closing = true;
    // Fetches in flight end within their deadlines; their ranges go back too.
    const inflight: Promise<void>[] = [];
    for (const c of this.collections.values()) if (c.inflight !== null) inflight.push(c.inflight);
    await Promise.allSettled(inflight);
    // Retire every range first: from here on no caller can take its numbers.
    // Per target, groups of items that must travel in one call, in order.
    const groups = new Map<number, ReturnItem[][]>();
    const add = (target: number, group: ReturnItem[]) => {
      let list = groups.get(target);
      if (list === undefined) groups.set(target, (list = []));
      list.push(group);
    };
    for (const c of this.collections.values()) {
      c.retired = true;
      const ahead = c.ahead;
      const cur = c.cur;
      c.ahead = null;
      c.cur = null;
      const whole = ahead !== null ? { collection: c.name, range: ahead, last: ahead.low - 1n } : null;
      const tail = cur !== null && !cur.dry() ? { collection: c.name, range: cur, last: cur.takenUpTo() } : null;
      if (whole !== null && tail !== null && whole.range.target === tail.range.target) {
        add(whole.range.target, [whole, tail]); // later range first
      } else {
        if (whole !== null) add(whole.range.target, [whole]);
        if (tail !== null) add(tail.range.target, [tail]);
      }
    }
    const sends: Promise<void>[] = [];
    for (const [target, list] of groups) sends.push(this.returnTo(target, list));
    await Promise.allSettled(sends);
    this.transport.close();
  }

  /** Sends one target its returns, in batches of whole groups (<= 1000 items, < 60 KiB). */
  private async returnTo(target: number, groups: ReturnItem[][]): Promise<void> {
    let batch: ReturnItem[] = [];
    let bytes = 0;
    const batches: ReturnItem[][] = [];
    for (const group of groups) {
      const size = group.reduce((n, item) => n + Buffer.byteLength(item.collection) + 64, 0);
      if (batch.length > 0 && (batch.length + group.length > MAX_BATCH_ITEMS || bytes + size > MAX_BATCH_BYTES)) {
        batches.push(batch);
        batch = [];
        bytes = 0;
      }
      batch.push(...group);
      bytes += size;
    }
    if (batch.length > 0) batches.push(batch);
    for (const b of batches) await this.returnBatch(target, b);
  }

  private async returnBatch(target: number, items: ReturnItem[]): Promise<void> {
    const stub = this.transport.stubs[target];
    const requests = items.map(toReturnRequest);
    let results: ReturnRangeResult[];
    try {
      const response = await this.transport.withRetries<{ returns: ReturnRangeRequest[] }, ReturnRangesResponse>(
        () => stub.ReturnRanges,
        stub,
        { returns: requests },
      );
      results = response.results;
      if (results.length !== items.length) {
        throw Object.assign(new Error(`ReturnRanges answered ${results.length} results for ${items.length} returns`), {
          code: StatusCode.INTERNAL,
          details: `ReturnRanges answered ${results.length} results for ${items.length} returns`,
        });
      }
    } catch (e) {
      const err = e as grpc.ServiceError;
      if (err.code === StatusCode.UNIMPLEMENTED) {
        // A node older than ReturnRanges: one ReturnRange per item, same order.
        for (let i = 0; i < items.length; i++) {
          try {
            const r = await this.transport.withRetries<ReturnRangeRequest, ReturnRangeResponse>(
              () => stub.ReturnRange,
              stub,
              requests[i],
            );
            this.recordReturn(target, items[i], { code: 0, message: '', applied: r.applied, max: r.max });
          } catch (e2) {
            const err2 = e2 as grpc.ServiceError;
            this.recordReturn(target, items[i], { code: err2.code ?? StatusCode.UNKNOWN, message: err2.details ?? String(e2), applied: false, max: '0' });
          }
        }
        return;
      }
      for (const item of items) {
        this.recordReturn(target, item, { code: err.code ?? StatusCode.UNKNOWN, message: err.details ?? String(e), applied: false, max: '0' });
      }
      return;
    }
    for (let i = 0; i < items.length; i++) this.recordReturn(target, items[i], results[i]);
  }

  private recordReturn(target: number, item: ReturnItem, result: ReturnRangeResult): void {
    if (result.code !== 0) {
      this.counters.returns_failed++;
      this.countError(result.code);
      this.log(
        `hilo: returning numbers ${item.last + 1n}-${item.range.high} of collection "${item.collection}" to ${this.transport.targets[target]} failed: ${statusCodeName(result.code)}: ${result.message}`,
      );
      return;
    }
    // A refusal with Max already at `last` is a retried copy of a return
    // that applied (its reply was lost): the numbers are back all the same.
    if (result.applied || BigInt(result.max) === item.last) {
      this.counters.returns_applied++;
    } else {
      this.counters.returns_refused++;
    }
  }

  private countError(code: number): void {
    const name = statusCodeName(code);
    this.counters.errors[name] = (this.counters.errors[name] ?? 0) + 1;
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

function toReturnRequest(item: ReturnItem): ReturnRangeRequest {
  return {
    collection: item.collection,
    end: item.range.high.toString(),
    last: item.last.toString(),
    node_tag: item.range.tag,
    range_token: item.range.token,
  };
}
