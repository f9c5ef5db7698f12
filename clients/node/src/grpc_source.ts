// GrpcRangeSource: the RangeSource behind a HiloClient, on its Transport.
// It judges every NextRange reply (CONTRACT.md R11) so that a refused one
// counts as that target failing, counts failovers, and hands ranges back
// in ReturnRanges batches per target (ReturnRange to a node older than
// that). Private to the package.

import type * as grpc from '@grpc/grpc-js';
import { HiloError, StatusCode, quoteName } from './errors.js';
import type { HeldView } from './held.js';
import type {
  NextRangeRequest,
  NextRangeResponse,
  ReturnRangeRequest,
  ReturnRangeResponse,
  ReturnRangeResult,
  ReturnRangesResponse,
  Timestamp,
} from './proto.js';
import type { IssuedRange, Previous, RangeSource, ReturnItem, ReturnOutcome } from './source.js';
import type { Transport } from './transport.js';

const NODE_TAG = /^[A-Z0-9]{1,4}$/;
// The most numbers a client takes in one range (CONTRACT.md R11): a server's
// ranges are at most its --max_range_size (2^20 by default); a bigger one is
// a tampered reply or a broken server, whose high echoed as last_max every
// node would then refuse.
const MAX_RANGE_SIZE = 1n << 32n;
const MAX_BATCH_ITEMS = 1000;
const MAX_BATCH_BYTES = 60 * 1024;

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

/** The range's bounds, or what breaks the contract in a NextRange reply. */
function check(
  collection: string,
  r: NextRangeResponse,
  held: HeldView,
): { low: bigint; high: bigint } | string {
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
  const overlap = held.problemWith(r.node_tag, low, high);
  if (overlap !== null) return `${overlap} (collection ${quoteName(collection)})`;
  return { low, high };
}

export class GrpcRangeSource implements RangeSource {
  /** Fetches another target answered because the preferred one failed. */
  failovers = 0;
  private readonly transport: Transport;

  constructor(transport: Transport) {
    this.transport = transport;
  }

  /** One NextRange (Transport.nextRange: failover across targets), its reply judged by check(). */
  async next(collection: string, previous: Previous, held: HeldView): Promise<IssuedRange> {
    const request: NextRangeRequest = {
      collection,
      last_size: previous.size.toString(),
      last_range_at: previous.rangeAt,
      last_max: previous.max.toString(),
    };
    const accepted = await this.transport.nextRange(request, (r) => check(collection, r, held));
    if (accepted.failedOver) this.failovers++;
    const { low, high } = accepted.value;
    const response = accepted.response;
    return { low, high, tag: response.node_tag, token: response.range_token, target: accepted.target, rangeAt: response.range_at };
  }

  /**
   * Hands each item back to the node that issued it: one outcome per item,
   * in order; never rejects. Every target at once; to one target, batches
   * of whole pairs (<= 1000 items, < 60 KiB) one after another, each retried
   * on UNAVAILABLE or DEADLINE_EXCEEDED within rpcDeadlineMs.
   */
  async returnMany(items: readonly ReturnItem[]): Promise<ReturnOutcome[]> {
    const outcomes: ReturnOutcome[] = new Array(items.length);
    // Per target, the indexes of its items in groups that travel together.
    const groups = new Map<number, number[][]>();
    for (let i = 0; i < items.length; i++) {
      const target = items[i].range.target;
      let list = groups.get(target);
      if (list === undefined) groups.set(target, (list = []));
      const pairs = i > 0 && items[i - 1].withNext;
      if (pairs) list[list.length - 1].push(i);
      else list.push([i]);
    }
    const sends: Promise<void>[] = [];
    for (const [target, list] of groups) sends.push(this.returnTo(target, items, list, outcomes));
    await Promise.all(sends);
    return outcomes;
  }

  /** Sends one target its returns, in batches of whole groups. */
  private async returnTo(target: number, items: readonly ReturnItem[], groups: number[][], outcomes: ReturnOutcome[]): Promise<void> {
    let batch: number[] = [];
    let bytes = 0;
    const batches: number[][] = [];
    for (const group of groups) {
      const size = group.reduce((n, i) => n + Buffer.byteLength(items[i].collection) + 64, 0);
      if (batch.length > 0 && (batch.length + group.length > MAX_BATCH_ITEMS || bytes + size > MAX_BATCH_BYTES)) {
        batches.push(batch);
        batch = [];
        bytes = 0;
      }
      batch.push(...group);
      bytes += size;
    }
    if (batch.length > 0) batches.push(batch);
    for (const b of batches) {
      const results = await this.returnBatch(target, b.map((i) => items[i]));
      b.forEach((i, k) => (outcomes[i] = results[k]));
    }
  }

  /** One ReturnRanges call (ReturnRange per item to a node that answers UNIMPLEMENTED): an outcome per item. */
  private async returnBatch(target: number, items: readonly ReturnItem[]): Promise<ReturnOutcome[]> {
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
    } catch (e) {
      const err = e as grpc.ServiceError;
      if (err.code !== StatusCode.UNIMPLEMENTED) return items.map(() => this.failure(target, err));
      // A node older than ReturnRanges: one ReturnRange per item, same order.
      const outcomes: ReturnOutcome[] = [];
      for (const request of requests) {
        try {
          const r = await this.transport.withRetries<ReturnRangeRequest, ReturnRangeResponse>(() => stub.ReturnRange, stub, request);
          outcomes.push({ applied: r.applied, max: BigInt(r.max) });
        } catch (e2) {
          outcomes.push(this.failure(target, e2 as grpc.ServiceError));
        }
      }
      return outcomes;
    }
    if (results.length !== items.length) {
      const wrong = `${this.transport.targets[target]}: ReturnRanges answered ${results.length} results for ${items.length} returns`;
      return items.map(() => new HiloError(StatusCode.INTERNAL, wrong));
    }
    return results.map((r) =>
      r.code !== 0
        ? new HiloError(r.code, `${this.transport.targets[target]}: ${r.message}`)
        : { applied: r.applied, max: BigInt(r.max) },
    );
  }

  private failure(target: number, err: grpc.ServiceError): HiloError {
    return new HiloError(err.code ?? StatusCode.UNKNOWN, `${this.transport.targets[target]}: ${err.details ?? String(err)}`, { cause: err });
  }
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
