package io.hilo.client;

import com.google.protobuf.Timestamp;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One range a node issued: immutable bounds, tag, token and issuing target, plus the one counter that the
 * fast path moves. A number is taken with a single atomic add on {@link #taken}; the offset it returns is
 * the caller's alone, and it is a number of this range only while it is below {@link #size}. Retiring the
 * range pushes the counter far past any size in one atomic swap, so no caller can take a number of a range
 * after it was retired (and its tail handed back).
 */
final class Range {
  /** What the counter is set to on retirement: far above every size, far below overflow. */
  private static final long RETIRED = Long.MAX_VALUE / 2;

  private static final VarHandle TAKEN;

  static {
    try {
      TAKEN = MethodHandles.lookup().findVarHandle(Range.class, "taken", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Stands for "no range": every take fails. */
  static final Range NONE = new Range(1, 0, "", 0, -1, Timestamp.getDefaultInstance(), 0);

  final long low;
  final long high;
  /** high - low + 1; 0 for {@link #NONE}. */
  final long size;
  final String nodeTag;
  /** "-" + nodeTag: what a document ID ends with. */
  final String suffix;
  final long token;
  /** Index of the target that issued it: its returns go there. */
  final int target;
  final Timestamp rangeAt;
  /** The offset whose taker starts a prefetch; -1 for none. */
  final long prefetchOffset;

  @SuppressWarnings("unused") // through TAKEN
  private volatile long taken;

  Range(long low, long high, String nodeTag, long token, int target, Timestamp rangeAt, double prefetchAt) {
    this.low = low;
    this.high = high;
    this.size = high - low + 1;
    this.nodeTag = nodeTag;
    this.suffix = "-" + nodeTag;
    this.token = token;
    this.target = target;
    this.rangeAt = rangeAt;
    this.prefetchOffset =
        prefetchAt > 0 && size > 0 ? Math.max(0, (long) Math.ceil(prefetchAt * size) - 1) : -1;
  }

  /** Takes the next offset; a number of this range only if below {@link #size}. Lock-free. */
  long take() {
    return (long) TAKEN.getAndAdd(this, 1L);
  }

  /** How many of its numbers were taken so far (all of them once it is used up or retired). */
  long taken() {
    return Math.min((long) TAKEN.getVolatile(this), size);
  }

  /**
   * Retires the range: no take succeeds afterwards. Returns how many of its numbers were taken. Called once
   * per range, by its cache, under the cache's lock.
   */
  long retire() {
    long before = (long) TAKEN.getAndSet(this, RETIRED);
    return Math.min(before, size);
  }

  @Override
  public String toString() {
    return "[" + low + ", " + high + "] of node " + nodeTag;
  }
}
