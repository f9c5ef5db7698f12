// RangeSource: all a RangeCache asks of the hilo servers, the next range of
// its collection, and the shapes of a return that HiloClient hands to
// GrpcRangeSource. The cache never sees the client, its channels or its
// other collections: a test or another transport can stand behind this one
// method. Types only. Private to the package.

import type { HiloError } from './errors.js';
import type { HeldView } from './held.js';
import type { Timestamp } from './proto.js';
import type { Range } from './range.js';

/** What a NextRange reports of the range the client got before it (CONTRACT.md R4). */
export interface Previous {
  /** Its high - low + 1; 0 before the first range. */
  size: bigint;
  /** Its range_at, as the node sent it; null before the first range. */
  rangeAt: Timestamp | null;
  /** Its high, or after a return the last number handed out; 0 before the first range. */
  max: bigint;
}

/** A range a server issued, which passed the source's checks (CONTRACT.md R11). */
export interface IssuedRange {
  low: bigint;
  high: bigint;
  tag: string;
  token: string;
  /** Which target issued it: its returns go there. */
  target: number;
  rangeAt: Timestamp | null;
}

/** The one call a RangeCache makes to get numbers. */
export interface RangeSource {
  /**
   * The next range of `collection`, reporting `previous`. A reply is
   * refused (that target counts as failing) when its range overlaps what
   * `held` says this client holds or handed out of that node's ranges of
   * the collection.
   * Rejects with a HiloError (CONTRACT.md R13).
   */
  next(collection: string, previous: Previous, held: HeldView): Promise<IssuedRange>;
}

/** One range handed back: numbers last + 1 .. range.high, to the target that issued it. */
export interface ReturnItem {
  collection: string;
  range: Range;
  last: bigint;
  /** This item and the next are a pair of adjacent ranges of one node: they travel in one call, in order. */
  withNext: boolean;
}

/** A node's answer to one return (a refusal is an answer), or why it failed. */
export type ReturnOutcome = { applied: boolean; max: bigint } | HiloError;
