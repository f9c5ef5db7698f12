package io.hilo.client;

import com.google.protobuf.Timestamp;
import io.grpc.Status;
import java.time.Duration;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * One collection's ranges, handed out number by number.
 *
 * <p>Fast path: one volatile read of the current {@link Range} and one atomic add on its counter; no lock.
 * A caller that finds the range used up takes the slow path under {@link #lock}: it first TAKES a number
 * from whatever range is current (another caller may have refilled meanwhile; reading the counter would
 * let two callers have one number), then publishes a prefetched range if one waits, else starts a fetch
 * unless one is in flight. Exactly one fetch is in flight at a time: it is the {@link CompletableFuture} in
 * {@link #inFlight}, which the other callers join with a bound; a failed fetch fails its waiters with its own
 * error (they do not fetch again), and the next caller starts a new one.
 *
 * <p>Prefetch: the caller that takes the offset at {@code prefetchAt} of a range schedules a fetch of the
 * next range on {@link Setup#prefetcher}; the result waits in {@link #next}, with its own tag and token,
 * until the current range runs dry.
 *
 * <p>Returns ({@link #takeUnused}, then {@link #endReturn}): the current range is retired (its counter
 * pushed past its end in one atomic swap, so every number is either taken before, and counted in the
 * return's {@code last}, or never), a range fetched ahead goes back whole, and the numbers a later reply is
 * judged by go down to what was really used. While a return that keeps the cache open is in flight,
 * callers wait for it as for a fetch, then fetch new ranges; none of a returned range is handed out again.
 *
 * <p>Forgetting ({@link #forgetIfUnused}): a cache that never received a range and has no fetch in flight
 * after a caller's failure closes itself for good, so that the client can drop it (a caller naming many
 * collections the server refuses must not grow the client by one cache each); its calls then throw
 * {@link Forgotten} and the caller looks the collection up again. The fast path ({@link #tryNext}) is split
 * from the slow one so that a caller can keep its exception handler off the fast path.
 *
 * <p>The cache owns its refill: it talks to the servers only through its {@link RangeFetcher} and knows
 * nothing of the client that made it, so a test can drive it with a fake node.
 *
 * <p>Thread-safe.
 */
final class RangeCache {
  /**
   * What every cache of a client shares: the share of a range used before the next is fetched ahead (0:
   * never); how long a caller waits for another caller's fetch; where prefetches run; where best-effort
   * failures are logged (one line at a time); the clock the runway is timed on (nanoseconds).
   */
  record Setup(
      double prefetchAt, Duration waitBound, Executor prefetcher, Consumer<String> log, LongSupplier clock) {}

  /**
   * Thrown by the calls of a cache that {@link #forgetIfUnused} closed (never by its fast path): the
   * caller drops it from its client (if still there) and looks the collection up again. Never reaches the
   * application. No stack trace: it is a signal, not an error.
   */
  static final class Forgotten extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private Forgotten() {
      super("forgotten", null, false, false);
    }
  }

  private static final Forgotten FORGOTTEN = new Forgotten();

  /**
   * What a {@link CollectionHandle} holds until its first call looks its collection up: a cache forgotten
   * from the start, so that its fast path finds no range and its slow path throws {@link Forgotten}, on
   * which the handle looks the collection up, as it does after its cache was forgotten. Shared by every
   * handle; never in a client's table; never fetches.
   */
  static final RangeCache NOT_LOOKED_UP = forgottenFromTheStart();

  private static RangeCache forgottenFromTheStart() {
    RangeCache c =
        new RangeCache("", null, new Setup(0, Duration.ZERO, Runnable::run, line -> {}, () -> 0L));
    c.closed = true;
    c.forgotten = true;
    return c;
  }

  private final String collection;
  private final RangeFetcher fetcher;
  private final Setup setup;

  /** The range numbers are taken from; {@link Range#NONE} before the first fetch and after close. */
  private volatile Range current = Range.NONE;

  private final ReentrantLock lock = new ReentrantLock();
  // Guarded by lock:
  /**
   * What callers wait for instead of fetching: the fetch in flight (a refill or a prefetch) or a return
   * of the ranges (keep-open, {@link #takeUnused}); null if none.
   */
  private CompletableFuture<Void> inFlight;
  /** A prefetched range, not yet current; null if none. */
  private Range next;
  /** The client's previous range of this collection, as NextRange's last_* fields report it. */
  private long lastSize;
  private Timestamp lastRangeAt;
  /**
   * The previous range's high, whichever node issued it (CONTRACT.md R4: after a failover, a node far
   * behind refuses another node's high, R17); after its return (unless refused), the highest number handed
   * out of that node's ranges.
   */
  private long lastMax;
  /** Per node tag, the highest number handed out of that node's ranges used up or retired (absent: none). */
  private final Map<String, Long> used = new HashMap<>();
  /** Set by takeUnused with close (the client closed), or with {@link #forgotten} by forgetIfUnused. */
  private boolean closed;
  private boolean forgotten;
  /**
   * The runway's window, moved only by {@link #use}: it began when the range before the current one came
   * into use (the current one, for the first), with the numbers taken of that earlier range.
   */
  private long usedSinceNanos;
  private long windowStartNanos;
  private long windowTakenBefore;
  /**
   * Per node tag: the numbers of this collection the client holds or handed out from that node's ranges;
   * after a return, whatever its answer, less that range's numbers above the last one used (CONTRACT.md
   * R11). A reply of that node overlapping them is refused. Written under the lock; read by the fetcher's
   * check.
   */
  private final HeldNumbers held = new HeldNumbers();

  // Stats: moved only where a range is fetched or returned. Every move that a failed call makes happens
  // before its fetch's inFlight is cleared (so before forgetIfUnused can succeed): a forgotten cache's
  // counters are final when the client takes them over.
  final AtomicLong callsWaited = new AtomicLong();
  final AtomicLong rangesFetched = new AtomicLong();
  final AtomicLong rangesPrefetched = new AtomicLong();
  final AtomicLong returnsApplied = new AtomicLong();
  final AtomicLong returnsRefused = new AtomicLong();
  final AtomicLong returnsFailed = new AtomicLong();
  final AtomicLongArray errors = new AtomicLongArray(Status.Code.values().length);

  RangeCache(String collection, RangeFetcher fetcher, Setup setup) {
    this.collection = collection;
    this.fetcher = fetcher;
    this.setup = setup;
  }

  String collection() {
    return collection;
  }

  /**
   * The next number and its tag. Throws HiloException as {@link HiloClient#nextId} does, or {@link
   * Forgotten}.
   */
  Id next() {
    Id id = tryNext();
    return id != null ? id : slowNext();
  }

  /**
   * The fast path alone: the next number of the current range, or null once it ran dry (then {@link
   * #slowNext}). One volatile read and one atomic add; no lock; never throws.
   */
  Id tryNext() {
    Range r = current;
    long offset = r.take();
    if (offset < r.size) {
      if (offset == r.prefetchOffset) schedulePrefetch();
      return new Id(r.low + offset, r.nodeTag);
    }
    return null;
  }

  /** {@code prefix + number + "-" + tag}; {@code prefix} is the collection and the separator. */
  String nextDocumentId(String prefix) {
    String id = tryNextDocumentId(prefix);
    return id != null ? id : slowNextDocumentId(prefix);
  }

  /** As {@link #tryNext}, as a document ID. */
  String tryNextDocumentId(String prefix) {
    Range r = current;
    long offset = r.take();
    if (offset < r.size) {
      if (offset == r.prefetchOffset) schedulePrefetch();
      return prefix + (r.low + offset) + r.suffix;
    }
    return null;
  }

  /** As {@link #slowNext}, as a document ID. */
  String slowNextDocumentId(String prefix) {
    Id id = slowNext();
    return prefix + id.number() + "-" + id.nodeTag();
  }

  /**
   * After the fast path found the range used up: takes a number under the lock, or fetches (or waits for
   * the fetch in flight). Throws HiloException, or {@link Forgotten} once the cache was forgotten.
   */
  Id slowNext() {
    long deadline = System.nanoTime() + setup.waitBound().toNanos();
    boolean waited = false;
    while (true) {
      CompletableFuture<Void> pending;
      boolean fetchHere = false;
      lock.lock();
      try {
        if (closed) throw closedError();
        Range r = current;
        long offset = r.take();  // take, never just read: the number is ours alone
        if (offset < r.size) {
          if (offset == r.prefetchOffset) schedulePrefetch();
          return new Id(r.low + offset, r.nodeTag);
        }
        if (next != null) {
          use(next);  // the prefetched range takes over without a round trip
          next = null;
          continue;
        }
        if (inFlight == null) {
          inFlight = new CompletableFuture<>();
          fetchHere = true;
        }
        pending = inFlight;
        if (!waited) {
          // Counted as the wait begins, under the lock and while a fetch or return is in flight, not when
          // the call ends: once nothing is in flight, every call that waited on this cache is counted.
          waited = true;
          callsWaited.incrementAndGet();
        }
      } finally {
        lock.unlock();
      }
      if (fetchHere) {
        fetchAsHolder(pending);
        continue;
      }
      long remaining = deadline - System.nanoTime();
      if (remaining <= 0) throw waitedTooLong();
      try {
        pending.get(remaining, TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        throw forWaiters(e.getCause(), "fetch");
      } catch (TimeoutException e) {
        throw waitedTooLong();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new HiloException(
            Status.Code.CANCELLED, "interrupted while waiting for a range of " + Names.quote(collection), e);
      }
    }
  }

  /**
   * Fetches as the holder of {@link #inFlight} ({@code pending}) and ends it, whatever happens: the range
   * becomes current and the waiters look again; on any failure (a HiloException, or anything else: a
   * RuntimeException of a ClientInterceptor, an Error) inFlight is cleared, the waiters fail with it as a
   * HiloException ({@link #forWaiters}), and the thrown thing itself goes on to this caller.
   */
  private void fetchAsHolder(CompletableFuture<Void> pending) {
    try {
      Range range = fetch();
      lock.lock();
      try {
        inFlight = null;
        if (!closed) use(range);
      } finally {
        lock.unlock();
      }
    } catch (Throwable t) {
      failFlight(pending, t, "fetch");
      throw t;
    }
    pending.complete(null);
  }

  /**
   * Ends the flight {@code pending} after {@code t}: clears {@link #inFlight} if it is still that one, and
   * fails its waiters with {@code t} as a HiloException; should even building that fail (an
   * OutOfMemoryError), with {@code t} itself, which each waiter wraps: nothing leaves them waiting.
   */
  private void failFlight(CompletableFuture<Void> pending, Throwable t, String what) {
    Throwable failure = t;
    try {
      lock.lock();
      try {
        if (inFlight == pending) inFlight = null;
      } finally {
        lock.unlock();
      }
      failure = forWaiters(t, what);
    } finally {
      pending.completeExceptionally(failure);
    }
  }

  /**
   * What the waiters of a flight that failed with {@code t} get: {@code t} if it is a HiloException, else
   * UNKNOWN naming it (with it as the cause), so that every caller of the client gets a HiloException but
   * the one whose own call threw.
   */
  private HiloException forWaiters(Throwable t, String what) {
    if (t instanceof HiloException h) return h;
    return new HiloException(
        Status.Code.UNKNOWN,
        "another caller's " + what + " of the ranges of " + Names.quote(collection) + " failed: " + show(t), t);
  }

  /** {@code t} as a message shows it: its toString, or its class should that throw. */
  static String show(Throwable t) {
    try {
      return String.valueOf(t);
    } catch (RuntimeException e) {
      return t.getClass().getName() + " (whose toString threw " + e.getClass().getName() + ")";
    }
  }

  /** Makes {@code r} the current range. Under the lock. */
  private void use(Range r) {
    long now = setup.clock().getAsLong();
    Range old = current;
    if (old != Range.NONE) {
      long taken = old.taken();
      if (taken > 0) used.merge(old.nodeTag, old.low + taken - 1, Math::max);
      windowStartNanos = usedSinceNanos;
      windowTakenBefore = taken;
    } else {
      windowStartNanos = now;
      windowTakenBefore = 0;
    }
    usedSinceNanos = now;
    current = r;
  }

  /**
   * How long the numbers this cache holds (the rest of the current range and a range fetched ahead) last at
   * the rate it handed them out since its window began; null when it holds no range, handed out no number in
   * the window, or no time passed in it.
   */
  Duration runway(long nowNanos) {
    lock.lock();
    try {
      Range r = current;
      if (r == Range.NONE || closed) return null;
      long taken = r.taken();
      long held = r.size - taken + (next != null ? next.size : 0);
      long handedOut = windowTakenBefore + taken;
      long window = nowNanos - windowStartNanos;
      if (handedOut <= 0 || window <= 0) return null;
      return Duration.ofNanos(Math.round(window * ((double) held / handedOut)));
    } finally {
      lock.unlock();
    }
  }

  /** What a caller gets once {@link #closed} is set (under the lock). */
  private RuntimeException closedError() {
    if (forgotten) return FORGOTTEN;
    return new HiloException(Status.Code.FAILED_PRECONDITION, "the hilo client is closed");
  }

  /**
   * Closes the cache for good if it never received a range (none fetched or prefetched) and nothing is in
   * flight (no fetch, no return): its fetches failed, for a name the server refuses, say. It then holds
   * nothing (no range, no numbers handed out, nothing to report or hand back), and a new cache of the
   * collection would start where it stands; the client drops it, so that a caller naming many such
   * collections does not grow the client. From then on {@link #next} throws {@link Forgotten} and no fetch
   * starts. True if it did; false for a cache that ever received a range, is busy or is closed.
   */
  boolean forgetIfUnused() {
    lock.lock();
    try {
      if (closed || inFlight != null || rangesFetched.get() != 0 || current != Range.NONE || next != null) {
        return false;
      }
      closed = true;
      forgotten = true;
      return true;
    } finally {
      lock.unlock();
    }
  }

  private HiloException waitedTooLong() {
    return new HiloException(
        Status.Code.DEADLINE_EXCEEDED,
        "waited " + setup.waitBound().toMillis() + " ms for another caller's fetch of a range of "
            + Names.quote(collection) + " (targets " + fetcher.describe() + ")");
  }

  private void schedulePrefetch() {
    try {
      setup.prefetcher().execute(this::prefetch);
    } catch (RejectedExecutionException e) {
      // Closing: nothing is fetched ahead any more.
    }
  }

  /** Fetches the next range ahead of need unless one waits or a fetch is in flight. On the executor. */
  void prefetch() {
    CompletableFuture<Void> pending;
    lock.lock();
    try {
      if (closed || inFlight != null || next != null || current == Range.NONE) return;
      pending = inFlight = new CompletableFuture<>();
    } finally {
      lock.unlock();
    }
    Range range = null;
    try {
      range = fetch();
    } catch (HiloException e) {
      // Not worth a caller's error: a caller that runs dry fetches (and reports) by itself.
    } catch (Throwable t) {
      // Anything else (an interceptor's RuntimeException, an Error; counted by fetch): the callers waiting
      // for this fetch get it as a HiloException, and it is logged, as other background failures are, not
      // thrown on the executor's thread (a stack trace on stderr, a pool thread lost).
      failFlight(pending, t, "prefetch");
      setup.log().accept("hilo: prefetching a range of " + Names.quote(collection) + " failed: " + show(t));
      return;
    }
    lock.lock();
    try {
      inFlight = null;
      if (range != null && !closed) {
        next = range;
        rangesPrefetched.incrementAndGet();
      }
    } finally {
      lock.unlock();
    }
    pending.complete(null);  // waiters look again, and fetch themselves if nothing came
  }

  /**
   * Asks the targets for the next range, reporting the previous one. Called only by the holder of {@link
   * #inFlight}, without the lock.
   */
  private Range fetch() {
    NextRangeRequest.Builder request = NextRangeRequest.newBuilder().setCollection(collection);
    lock.lock();
    try {
      request.setLastSize(lastSize).setLastMax(lastMax);
      if (lastRangeAt != null) request.setLastRangeAt(lastRangeAt);
    } finally {
      lock.unlock();
    }
    RangeFetcher.Reply reply;
    try {
      reply = fetcher.nextRange(request.build(), this::problemWith);
    } catch (Throwable e) {
      // Anything but a HiloException (an interceptor's RuntimeException, an Error, a checked exception
      // thrown undeclared) counts as UNKNOWN.
      errors.incrementAndGet((e instanceof HiloException h ? h.code() : Status.Code.UNKNOWN).ordinal());
      throw e;
    }
    NextRangeResponse r = reply.response();
    lock.lock();
    try {
      lastSize = r.getHigh() - r.getLow() + 1;
      lastRangeAt = r.getRangeAt();
      lastMax = r.getHigh();
      // The check refused anything overlapping what the client has of the node.
      held.add(r.getNodeTag(), r.getLow(), r.getHigh());
    } finally {
      lock.unlock();
    }
    rangesFetched.incrementAndGet();
    return new Range(
        r.getLow(), r.getHigh(), r.getNodeTag(), r.getRangeToken(), reply.target(), r.getRangeAt(),
        setup.prefetchAt());
  }

  /** Null for a usable NextRange reply, else what is wrong with it. */
  private String problemWith(NextRangeResponse r) {
    if (r.getLow() < 1 || r.getHigh() < r.getLow()) {
      return "NextRange replied with the invalid range [" + r.getLow() + ", " + r.getHigh() + "] of "
          + Names.quote(collection);
    }
    // high - low cannot overflow: low >= 1.
    if (r.getHigh() - r.getLow() >= MAX_RANGE_SIZE) {
      return "NextRange replied with the range [" + r.getLow() + ", " + r.getHigh() + "] of "
          + Names.quote(collection) + ", " + Long.toUnsignedString(r.getHigh() - r.getLow() + 1)
          + " numbers; a client takes at most " + MAX_RANGE_SIZE + " in one range";
    }
    if (r.hasRangeAt() && !isValidTimestamp(r.getRangeAt())) {
      return "NextRange replied with range_at " + r.getRangeAt().getSeconds() + " s " + r.getRangeAt().getNanos()
          + " ns, which is not a valid Timestamp (0001-01-01 to 9999-12-31)";
    }
    if (!isValidNodeTag(r.getNodeTag())) {
      return "NextRange replied with node tag " + Names.quote(r.getNodeTag())
          + ", which is not 1-4 characters of A-Z and 0-9";
    }
    String overlap = held.problemWith(r.getNodeTag(), r.getLow(), r.getHigh());
    return overlap == null ? null : overlap + " (collection " + Names.quote(collection) + ")";
  }

  /**
   * The most numbers a client takes in one range (CONTRACT.md R11): a server's ranges are at most its
   * --max_range_size (2^20 by default); a bigger one is a tampered reply or a broken server, whose high echoed
   * as last_max every node would then refuse.
   */
  static final long MAX_RANGE_SIZE = 1L << 32;

  /** google.protobuf.Timestamp's range, 0001-01-01 to 9999-12-31: a range_at outside it is never echoed. */
  static boolean isValidTimestamp(com.google.protobuf.Timestamp t) {
    return t.getSeconds() >= -62135596800L && t.getSeconds() <= 253402300799L && t.getNanos() >= 0
        && t.getNanos() <= 999_999_999;
  }

  static boolean isValidNodeTag(String tag) {
    if (tag.isEmpty() || tag.length() > 4) return false;
    for (int i = 0; i < tag.length(); i++) {
      char c = tag.charAt(i);
      if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
  }

  /** One range to hand back, and the last number handed out of it ({@code low - 1}: none). */
  record Item(Range range, long last) {
    ReturnRangeRequest toRequest(String collection) {
      return ReturnRangeRequest.newBuilder()
          .setCollection(collection)
          .setEnd(range.high)
          .setLast(last)
          .setNodeTag(range.nodeTag)
          .setRangeToken(range.token)
          .build();
    }
  }

  /**
   * What {@link #takeUnused} took to hand back, in the order the node must judge it: a range fetched ahead
   * whole, then the current range's unused tail. {@code pair}: the two are adjacent ranges of one node
   * (the later one right above the earlier), which must go in one call. {@code done}: what callers wait
   * for until {@link #endReturn} (null when none wait).
   */
  record Unused(List<Item> items, boolean pair, CompletableFuture<Void> done) {
    static final Unused NONE = new Unused(List.of(), false, null);
  }

  /**
   * Retires the current range and a range fetched ahead, so that no caller takes a number of them any
   * more, and says what to hand back; {@link #endReturn} must follow with the outcomes. First waits, at
   * most {@code waitNanos}, for a fetch in flight. With {@code close}, the cache is closed: callers fail
   * with FAILED_PRECONDITION from here on, and a fetch still in flight after the wait finds it closed and
   * uses nothing. Without, callers wait (as for a fetch) until endReturn, then fetch new ranges; if a
   * fetch is still in flight after the wait, or the cache is closed, nothing is taken ({@link
   * Unused#NONE}).
   */
  Unused takeUnused(long waitNanos, boolean close) {
    long deadline = System.nanoTime() + waitNanos;
    lock.lock();
    try {
      if (close) {
        closed = true;
      } else if (closed) {
        return Unused.NONE;
      }
      while (inFlight != null) {
        CompletableFuture<Void> pending = inFlight;
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          if (!close) return Unused.NONE;
          break;
        }
        lock.unlock();
        try {
          awaitQuietly(pending, left);
        } finally {
          lock.lock();
        }
        if (!close && closed) return Unused.NONE;
      }
      List<Item> items = new ArrayList<>(2);
      Range r = current;
      current = Range.NONE;
      boolean pair = false;
      if (next != null) {
        items.add(new Item(next, next.low - 1));
        pair = r != Range.NONE && next.target == r.target && next.low == r.high + 1;
        next = null;
      }
      if (r != Range.NONE) {
        long taken = r.retire();  // from here on no caller takes a number of it
        if (taken > 0) used.merge(r.nodeTag, r.low + taken - 1, Math::max);
        if (taken < r.size) items.add(new Item(r, r.low + taken - 1));
      }
      if (items.isEmpty()) return Unused.NONE;
      CompletableFuture<Void> done = null;
      if (!close) inFlight = done = new CompletableFuture<>();
      return new Unused(List.copyOf(items), pair && items.size() == 2, done);
    } finally {
      lock.unlock();
    }
  }

  private static void awaitQuietly(CompletableFuture<Void> pending, long nanos) {
    try {
      pending.get(nanos, TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // A failed fetch brought nothing; one still out is the caller's to judge.
    }
  }

  /**
   * Ends what {@link #takeUnused} began: counts and logs each outcome ({@code outcomes.get(i)} is that of
   * {@code unused.items().get(i)}), lowers the numbers a later range is judged by, and lets waiting callers
   * go on, whatever happens (should anything here throw, they fail with it). Called exactly once per Unused
   * that holds items. Throws what the log throws, once the cache is done with the return.
   */
  void endReturn(Unused unused, List<RangeFetcher.ReturnOutcome> outcomes) {
    List<String> failures = new ArrayList<>();
    CompletableFuture<Void> done = unused.done();
    try {
      lock.lock();
      try {
        judgeReturn(unused.items(), unused.pair(), outcomes, failures);
        if (done != null && inFlight == done) inFlight = null;
      } finally {
        lock.unlock();
      }
    } catch (Throwable t) {
      // Whatever went wrong, the callers waiting for this return are let go (with its error), not left to
      // wait their bound, nor every caller after them.
      if (done != null) failFlight(done, t, "return");
      throw t;
    }
    if (done != null) done.complete(null);
    for (String line : failures) setup.log().accept(line);
  }

  /** endReturn's work under the lock: counts each outcome, lowers the numbers held, adds log lines to failures. */
  private void judgeReturn(
      List<Item> items, boolean pair, List<RangeFetcher.ReturnOutcome> outcomes, List<String> failures) {
    // A pair's tail comes back only after the range above it did: when the tail is back, so is the
    // range fetched ahead, whatever its own answer says (a retried copy of a call whose reply was lost).
    boolean tailBack = pair && isBack(outcomes.get(1), items.get(1).last());
    for (int i = 0; i < items.size(); i++) {
      Item item = items.get(i);
      RangeFetcher.ReturnOutcome outcome = outcomes.get(i);
      // Whatever the answer, this range is never used again, so its numbers above `last` are no
      // longer held (CONTRACT.md R11). A return of unknown outcome may have applied, and then the
      // node's next range rightly starts right after `last`.
      Range r = item.range();
      held.remove(r.nodeTag, item.last() + 1, r.high);
      if (i == 0 && (isBack(outcome, item.last()) || tailBack || outcome.error() != null)) {
        // The first return is of the range fetched last, the one the next request reports (CONTRACT.md
        // R4): unless the node refused it, last_max becomes the highest number handed out of that node's
        // ranges, at or below its Max for ever, so the node skips none of the numbers other clients
        // handed back meanwhile. Refused, the range's high stays (at or below Max: nothing applied).
        lastMax = used.getOrDefault(r.nodeTag, 0L);
      }
      if (isBack(outcome, item.last()) || (i == 0 && tailBack)) {
        returnsApplied.incrementAndGet();
      } else if (outcome.error() != null) {
        returnsFailed.incrementAndGet();
        errors.incrementAndGet(outcome.error().code().ordinal());
        failures.add("hilo: returning numbers " + (item.last() + 1) + "-" + r.high + " of collection "
            + Names.quote(collection) + " failed: " + outcome.error().getMessage());
      } else {
        returnsRefused.incrementAndGet();
      }
    }
  }

  /** Whether the numbers of a return are back: applied, or refused with Max already at its `last` (a
   * retried copy of a return that applied, whose reply was lost). */
  private static boolean isBack(RangeFetcher.ReturnOutcome outcome, long last) {
    return outcome.error() == null && (outcome.applied() || outcome.max() == last);
  }
}
