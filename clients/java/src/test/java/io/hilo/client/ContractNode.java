package io.hilo.client;

import com.google.protobuf.Timestamp;
import io.grpc.Deadline;
import io.grpc.Status;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * One hilo node as README "The contract" describes it, as the only target of a {@link RangeCache} (index
 * 0), written from that text and not from the server's code: NextRange gives {@code max(Max, last_max) +
 * 1} on, {@code size} numbers (a server run with equal minimum and maximum range sizes), with a fresh
 * token; a return applies only with the token of the range issued last and not yet retired, {@code Max ==
 * end} and {@code return_floor <= last}, then {@code Max = last}, the token retires and the floor rises to
 * {@code last}; a whole return of a range issued right above the one before it gives that earlier range
 * its token and floor back (README "A pair of adjacent ranges"). A reply the cache's check refuses is
 * INTERNAL, as {@link Targets} answers with one target (the node has moved on all the same).
 *
 * <p>Hooks for what a test needs of a node: {@link #returnsLoseReplies} (a return applies, and its
 * caller sees DEADLINE_EXCEEDED), {@link #holdReturns} (a return call waits for the latch). Thread-safe.
 *
 * <p>Why a fake and not the real server (issue 34 asks each fake to say so): RangeCacheTest drives one
 * RangeCache through the {@link RangeFetcher} seam, with its prefetches run when the test says and a
 * return held open while callers draw, in one JVM and without timing. The real hilo_server behind the
 * conformance suite's proxy (proxy.py: return_hold_ms, an altered reply) covers the same rules end to
 * end in every language (range_after_applied_return_accepted, range_after_failed_return_accepted,
 * range_after_refused_return, echo_after_prefetched_pair_returned, keep_open_return_races_draws), but
 * that proxy lives in the Python runner and cannot stop a Java call at a chosen line of RangeCache, so
 * this node stays. What it may not differ in from README "The contract" and the server: where a range
 * starts ({@code max(Max, last_max) + 1}), when a return applies (its range's token, not retired,
 * {@code Max == end}, {@code return_floor <= last}) and what it then sets ({@code Max = last}, floor,
 * token retired), and the pair rule; its sizes are fixed (no growth) and its tokens are counters, which
 * the cache must not depend on. A change to those server rules is a change here too, or these tests
 * pass against a node that no longer exists.
 */
final class ContractNode implements RangeFetcher {
  private static final class Issued {
    final long low;
    final long high;
    final long token;
    boolean retired;

    Issued(long low, long high, long token) {
      this.low = low;
      this.high = high;
      this.token = token;
    }
  }

  private static final class Collection {
    long max;
    long returnFloor;
    Issued last;
    Issued before;
  }

  final String tag = "A";
  private final long size;
  private final Map<String, Collection> collections = new HashMap<>();
  private long tokens = 0x5eed;
  private final List<NextRangeRequest> requests = new ArrayList<>();
  private int returnCalls;

  volatile boolean returnsLoseReplies;
  /** When set, a return call waits for it (at most 10 s) before it is judged. */
  volatile CountDownLatch holdReturns;

  ContractNode(long size) {
    this.size = size;
  }

  @Override
  public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
    NextRangeResponse response;
    synchronized (this) {
      requests.add(request);
      Collection c = collections.computeIfAbsent(request.getCollection(), n -> new Collection());
      long low = Math.max(c.max, request.getLastMax()) + 1;
      Issued issued = new Issued(low, low + size - 1, ++tokens);
      c.before = c.last;
      c.last = issued;
      c.max = issued.high;
      c.returnFloor = low - 1;
      response =
          NextRangeResponse.newBuilder()
              .setLow(issued.low)
              .setHigh(issued.high)
              .setNodeTag(tag)
              .setRangeToken(issued.token)
              .setRangeAt(Timestamp.newBuilder().setSeconds(1_800_000_000L))
              .build();
    }
    String problem = check.apply(response);
    if (problem != null) throw new HiloException(Status.Code.INTERNAL, describe() + ": " + problem);
    return new Reply(response, 0);
  }

  @Override
  public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
    CountDownLatch hold = holdReturns;
    synchronized (this) {
      returnCalls++;
      notifyAll();
    }
    if (hold != null) {
      try {
        hold.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    List<ReturnOutcome> outcomes = new ArrayList<>();
    synchronized (this) {
      for (ReturnRangeRequest item : items) {
        ReturnOutcome judged = judge(item);
        outcomes.add(
            returnsLoseReplies
                ? new ReturnOutcome(false, 0, new HiloException(Status.Code.DEADLINE_EXCEEDED, "reply lost"))
                : judged);
      }
    }
    return outcomes;
  }

  private ReturnOutcome judge(ReturnRangeRequest r) {
    Collection c = collections.get(r.getCollection());
    if (c == null) return new ReturnOutcome(false, 0, null);
    Issued last = c.last;
    boolean applies =
        (r.getNodeTag().isEmpty() || r.getNodeTag().equals(tag)) && last != null && !last.retired
            && r.getRangeToken() == last.token && c.max == r.getEnd() && c.returnFloor <= r.getLast();
    if (!applies) return new ReturnOutcome(false, c.max, null);
    c.max = r.getLast();
    last.retired = true;
    Issued before = c.before;
    if (r.getLast() == last.low - 1 && before != null && !before.retired && before.high + 1 == last.low) {
      c.last = before;  // as if the later range had never been issued
      c.before = null;
      c.returnFloor = before.low - 1;
    } else {
      c.returnFloor = r.getLast();
    }
    return new ReturnOutcome(true, c.max, null);
  }

  @Override
  public String describe() {
    return "contract-node-" + tag;
  }

  synchronized List<NextRangeRequest> requests() {
    return List.copyOf(requests);
  }

  /** Waits (at most 10 s) until {@code n} return calls have arrived. */
  synchronized void awaitReturnCalls(int n) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (returnCalls < n) {
      long left = end - System.nanoTime();
      if (left <= 0) throw new AssertionError("only " + returnCalls + " return calls arrived, not " + n);
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
  }
}
