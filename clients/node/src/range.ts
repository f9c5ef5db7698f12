// Range: one range a server issued (bounds, node tag, token, the target that
// issued it) and the counter that hands its numbers out, as JS numbers while
// they are exact and as bigint above 2^53 - 1. Private to the package.

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A range a server issued: its bounds, tag, token, and the counter that hands its numbers out. */
export class Range {
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
