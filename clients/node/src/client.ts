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
import { HiloError, StatusCode, isTransient, statusCodeName } from './errors.js';
import type {
  HiLoStub,
  NextRangeRequest,
  NextRangeResponse,
  ReturnRangeRequest,
  ReturnRangeResponse,
  ReturnRangeResult,
  ReturnRangesResponse,
  Timestamp,
} from './proto.js';
import { hiloStubConstructor } from './proto.js';

/** Options of a HiloClient; only `targets` is required. */
export interface HiloClientOptions {
  /**
   * Server addresses in gRPC target syntax ("host:port", "dns:///name:port").
   * At least one. On UNAVAILABLE or DEADLINE_EXCEEDED, or a reply that breaks
   * the contract, the client tries the next, and stays with the one that
   * answered.
   */
  targets: readonly string[];
  /** Between collection and number in a document ID: one character, not '|', '-' or a digit. Default '/'. */
  separator?: string;
  /** Deadline of each NextRange attempt, and of each return with all its retries, in milliseconds. Default 5000. */
  rpcDeadlineMs?: number;
  /** Share of a range used before the next is fetched in the background: 0 (off) or in (0, 1). Default 0.2. */
  prefetchAt?: number;
  /** Channel credentials for every target (e.g. grpc.credentials.createSsl(ca)). Default: plaintext, or `tls`. */
  credentials?: grpc.ChannelCredentials;
  /** TLS without importing @grpc/grpc-js: PEM root certificates (and a client certificate for mTLS). */
  tls?: {
    ca?: Buffer | string;
    cert?: Buffer | string;
    key?: Buffer | string;
    /** The name to check the server's certificate against, when it differs from the target's host. */
    serverName?: string;
  };
  /** Extra channel options for every target (grpc-js `ChannelOptions`). */
  channelOptions?: grpc.ChannelOptions;
  /** Where best-effort failures (a return that failed after its retries) go; default: one line on stderr. */
  log?: (line: string) => void;
  /** A monotonic clock in milliseconds (default performance.now), for tests that move time by hand. */
  clock?: () => number;
}

/** One number and the tag of the node whose range it came from. */
export interface HiloId {
  /** Exact: a JavaScript number stops being exact above 2^53 - 1, and IDs reach 2^63 - 1. */
  readonly number: bigint;
  /** 1-4 characters of A-Z and 0-9. */
  readonly tag: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Stops this caller's wait for a range (rejects with CANCELLED); the fetch itself goes on for the others. */
  signal?: AbortSignal;
}

/**
 * Counters since the client was created; each only grows. They move only
 * where a range is fetched or returned, never on the fast path. The names
 * are those of clients/conformance/PROTOCOL.md.
 */
export interface HiloStats {
  /** ID requests that waited for a range from a server (or for that fetch's error). */
  calls_waited: number;
  /** Ranges a server issued to this client and the client accepted, prefetched or not. */
  ranges_fetched: number;
  /** Of those, ranges fetched ahead of need. */
  ranges_prefetched: number;
  /** Fetches answered by another target because the preferred one failed. */
  failovers: number;
  /** Ranges handed back: applied by the node, refused (normal: it issued a newer range), or failed after retries. */
  returns_applied: number;
  returns_refused: number;
  returns_failed: number;
  /** Failed fetches and returns, by status code name. */
  errors: Record<string, number>;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const NODE_TAG = /^[A-Z0-9]{1,4}$/;
const RETURN_ATTEMPTS = 3;
const MAX_BATCH_ITEMS = 1000;
const MAX_BATCH_BYTES = 60 * 1024;

/** A range a server issued: its bounds, tag, token, and the counter that hands its numbers out. */
class Range {
  readonly low: bigint;
  readonly high: bigint;
  readonly tag: string;
  readonly token: string;
  readonly target: number;
  /** "-" + tag: what follows the number in a document ID. */
  readonly suffix: string;
  /** True when every number of the range is a safe JS number: the counter is then a number. */
  readonly small: boolean;
  /** Counter (next number to hand out) and last number, as numbers, when `small`. */
  next: number;
  readonly last: number;
  /** The number whose taking starts the prefetch (-1: never), when `small`. */
  readonly trigger: number;
  /** The same three as bigint, when not `small`. */
  nextBig: bigint;
  readonly triggerBig: bigint;

  constructor(low: bigint, high: bigint, tag: string, token: string, target: number, prefetchAt: number) {
    this.low = low;
    this.high = high;
    this.tag = tag;
    this.token = token;
    this.target = target;
    this.suffix = '-' + tag;
    this.small = high <= MAX_SAFE;
    let trigger = -1n;
    if (prefetchAt > 0) {
      const size = high - low + 1n;
      // ceil(prefetchAt * size) numbers used, at least one.
      const share = BigInt(Math.max(1, Math.ceil(prefetchAt * Number(size))));
      trigger = low + (share < size ? share : size) - 1n;
    }
    this.next = this.small ? Number(low) : 0;
    this.last = this.small ? Number(high) : 0;
    this.trigger = this.small ? Number(trigger) : -1;
    this.nextBig = low;
    this.triggerBig = trigger;
  }

  /** The highest number handed out from this range, or low - 1 if none. */
  takenUpTo(): bigint {
    return this.small ? BigInt(this.next - 1) : this.nextBig - 1n;
  }

  dry(): boolean {
    return this.small ? this.next > this.last : this.nextBig > this.high;
  }
}

/** One collection's cache: the current range, the one fetched ahead, and what NextRange reports. */
class Collection {
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
  private readonly client: HiloClient;

  constructor(client: HiloClient, name: string, separator: string) {
    this.client = client;
    this.name = name;
    this.prefix = name + separator;
  }

  /** Takes the next document ID if a range has one left; undefined otherwise. Never waits. */
  tryDocumentId(): string | undefined {
    for (;;) {
      const r = this.cur;
      if (r !== null) {
        if (r.small) {
          const n = r.next;
          if (n <= r.last) {
            r.next = n + 1;
            if (n === r.trigger) this.client._prefetch(this);
            return this.prefix + n + r.suffix;
          }
        } else {
          const n = r.nextBig;
          if (n <= r.high) {
            r.nextBig = n + 1n;
            if (n === r.triggerBig) this.client._prefetch(this);
            return this.prefix + n + r.suffix;
          }
        }
      }
      if (!this.advance()) return undefined;
    }
  }

  /** Takes the next ID if a range has one left; undefined otherwise. Never waits. */
  tryId(): HiloId | undefined {
    for (;;) {
      const r = this.cur;
      if (r !== null) {
        if (r.small) {
          const n = r.next;
          if (n <= r.last) {
            r.next = n + 1;
            if (n === r.trigger) this.client._prefetch(this);
            return { number: BigInt(n), tag: r.tag };
          }
        } else {
          const n = r.nextBig;
          if (n <= r.high) {
            r.nextBig = n + 1n;
            if (n === r.triggerBig) this.client._prefetch(this);
            return { number: n, tag: r.tag };
          }
        }
      }
      if (!this.advance()) return undefined;
    }
  }

  /** Moves the range fetched ahead in when the current one is dry. */
  private advance(): boolean {
    if (this.ahead === null || (this.cur !== null && !this.cur.dry())) return false;
    this.cur = this.ahead;
    this.ahead = null;
    return true;
  }

  /** Puts a fetched range where callers find it. */
  place(range: Range): void {
    if (this.cur === null || this.cur.dry()) {
      this.cur = range;
    } else if (this.ahead === null) {
      this.ahead = range;
    } else {
      // Unreachable: one fetch at a time, and none while a range waits ahead.
      throw new HiloError(StatusCode.INTERNAL, `collection "${this.name}" already holds two ranges`);
    }
  }
}

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
  private readonly targets: readonly string[];
  private readonly separator: string;
  private readonly rpcDeadlineMs: number;
  private readonly prefetchAt: number;
  private readonly log: (line: string) => void;
  private readonly now: () => number;
  private readonly stubs: HiLoStub[];
  private readonly collections = new Map<string, Collection>();
  private preferred = 0;
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
    this.targets = [...targets];
    this.separator = separator;
    this.rpcDeadlineMs = deadline;
    this.prefetchAt = prefetchAt;
    this.log = options.log ?? ((line) => process.stderr.write(line + '\n'));
    this.now = options.clock ?? (() => performance.now());
    const credentials = options.credentials ?? makeCredentials(options.tls);
    const channelOptions: grpc.ChannelOptions = { ...options.channelOptions };
    if (options.tls?.serverName !== undefined) {
      channelOptions['grpc.ssl_target_name_override'] = options.tls.serverName;
      channelOptions['grpc.default_authority'] = options.tls.serverName;
    }
    const Stub = hiloStubConstructor();
    this.stubs = this.targets.map((t) => new Stub(t, credentials, channelOptions));
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

  /** The counters so far (a copy). */
  stats(): HiloStats {
    return { ...this.counters, errors: { ...this.counters.errors } };
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
    const bound = this.rpcDeadlineMs * (this.targets.length + 1);
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

  /** One NextRange, with failover across targets starting at the preferred one. */
  private async fetch(c: Collection, prefetch: boolean): Promise<Range> {
    const request: NextRangeRequest = {
      collection: c.name,
      last_size: c.lastSize.toString(),
      last_range_at: c.lastRangeAt,
      last_max: c.lastMax.toString(),
    };
    const failures: string[] = [];
    let anyInvalid = false;
    const first = this.preferred;
    for (let i = 0; i < this.stubs.length; i++) {
      const index = (first + i) % this.stubs.length;
      const target = this.targets[index];
      let response: NextRangeResponse;
      try {
        response = await this.unary<NextRangeRequest, NextRangeResponse>(
          this.stubs[index].NextRange,
          this.stubs[index],
          request,
          this.rpcDeadlineMs,
        );
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (isTransient(err.code)) {
          failures.push(`${target}: ${statusCodeName(err.code)}: ${err.details}`);
          continue;
        }
        this.countError(err.code);
        throw new HiloError(err.code, `${target}: NextRange for "${c.name}" failed: ${err.details}`, { cause: e });
      }
      const checked = this.check(c, response);
      if (typeof checked === 'string') {
        anyInvalid = true;
        failures.push(`${target}: ${checked}`);
        continue;
      }
      const { low, high } = checked;
      if (i > 0) this.counters.failovers++;
      this.preferred = index;
      this.counters.ranges_fetched++;
      if (prefetch) this.counters.ranges_prefetched++;
      c.lastSize = high - low + 1n;
      c.lastRangeAt = response.range_at;
      if (high > c.lastMax) c.lastMax = high;
      c.lastHighByTag.set(response.node_tag, high);
      return new Range(low, high, response.node_tag, response.range_token, index, this.prefetchAt);
    }
    const code = anyInvalid ? StatusCode.INTERNAL : StatusCode.UNAVAILABLE;
    this.countError(code);
    throw new HiloError(
      code,
      anyInvalid
        ? `no hilo server gave a usable range of "${c.name}": ${failures.join('; ')}`
        : `no hilo server answered NextRange for "${c.name}": ${failures.join('; ')}`,
    );
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
    for (const stub of this.stubs) stub.close();
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
    const stub = this.stubs[target];
    const requests = items.map(toReturnRequest);
    let results: ReturnRangeResult[];
    try {
      const response = await this.withRetries<{ returns: ReturnRangeRequest[] }, ReturnRangesResponse>(
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
            const r = await this.withRetries<ReturnRangeRequest, ReturnRangeResponse>(
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
        `hilo: returning numbers ${item.last + 1n}-${item.range.high} of collection "${item.collection}" to ${this.targets[target]} failed: ${statusCodeName(result.code)}: ${result.message}`,
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

  /** A unary call retried on UNAVAILABLE / DEADLINE_EXCEEDED, all attempts within rpcDeadlineMs. */
  private async withRetries<Req, Res>(method: () => Function, stub: HiLoStub, request: Req): Promise<Res> {
    const end = this.now() + this.rpcDeadlineMs;
    for (let attempt = 1; ; attempt++) {
      const left = end - this.now();
      // Each attempt gets an equal share of the time left.
      const budget = left / (RETURN_ATTEMPTS - attempt + 1);
      try {
        return await this.unary<Req, Res>(method(), stub, request, budget);
      } catch (e) {
        const err = e as grpc.ServiceError;
        if (!isTransient(err.code) || attempt >= RETURN_ATTEMPTS || end - this.now() <= 1) throw e;
      }
    }
  }

  /** One unary call with a deadline `budgetMs` from now (measured on the monotonic clock). */
  private unary<Req, Res>(method: Function, stub: HiLoStub, request: Req, budgetMs: number): Promise<Res> {
    // grpc-js takes a wall-clock deadline; it is derived from a monotonic
    // budget at the moment of the call, so a clock step cannot stretch it.
    const deadline = Date.now() + Math.max(1, Math.floor(budgetMs));
    return new Promise<Res>((resolve, reject) => {
      method.call(stub, request, { deadline }, (error: grpc.ServiceError | null, response?: Res) => {
        if (error) reject(error);
        else resolve(response as Res);
      });
    });
  }

  private countError(code: number): void {
    const name = statusCodeName(code);
    this.counters.errors[name] = (this.counters.errors[name] ?? 0) + 1;
  }
}

/**
 * One collection of a HiloClient, for callers that draw many IDs from it:
 * the name is looked up once. Draws from the same range as the client's
 * nextId on that collection.
 */
export class CollectionHandle {
  private readonly client: HiloClient;
  private readonly c: Collection;

  /** @internal */
  constructor(client: HiloClient, c: Collection) {
    this.client = client;
    this.c = c;
  }

  get name(): string {
    return this.c.name;
  }

  /** As HiloClient.nextId on this collection. */
  nextId(options?: CallOptions): Promise<HiloId> {
    const signal = options?.signal;
    if (signal?.aborted === true) return Promise.reject(aborted(this.c.name, signal));
    const id = this.c.tryId();
    if (id !== undefined) return Promise.resolve(id);
    return this.slowId(signal);
  }

  /** As HiloClient.nextDocumentId on this collection. */
  nextDocumentId(options?: CallOptions): Promise<string> {
    const signal = options?.signal;
    if (signal?.aborted === true) return Promise.reject(aborted(this.c.name, signal));
    const id = this.c.tryDocumentId();
    if (id !== undefined) return Promise.resolve(id);
    return this.slowDocumentId(signal);
  }

  /**
   * The next document ID if the cached range has one, else undefined (then
   * await nextDocumentId, which fetches). Synchronous: never does I/O, never
   * throws.
   */
  tryNextDocumentId(): string | undefined {
    return this.c.tryDocumentId();
  }

  /** The next ID if the cached range has one, else undefined. Synchronous. */
  tryNextId(): HiloId | undefined {
    return this.c.tryId();
  }

  private async slowId(signal: AbortSignal | undefined): Promise<HiloId> {
    let started: number | null = null;
    for (let counted = false; ; counted = true) {
      started = await this.client._wait(this.c, signal, started, counted);
      const id = this.c.tryId();
      if (id !== undefined) return id;
    }
  }

  private async slowDocumentId(signal: AbortSignal | undefined): Promise<string> {
    let started: number | null = null;
    for (let counted = false; ; counted = true) {
      started = await this.client._wait(this.c, signal, started, counted);
      const id = this.c.tryDocumentId();
      if (id !== undefined) return id;
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

function aborted(collection: string, signal: AbortSignal): HiloError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new HiloError(StatusCode.CANCELLED, `wait for a number of "${collection}" aborted: ${reason}`, {
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
