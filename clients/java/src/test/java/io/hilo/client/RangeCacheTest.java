package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.Timestamp;
import io.grpc.Deadline;
import io.grpc.Status;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * RangeCache on its own, against {@link ContractNode} (a node as README's contract describes it), for
 * what a keep-open return must do (CONTRACT.md R8, R11, R15): the cache stays usable, the numbers a
 * reply is judged by lose what was handed back unused, callers wait for the return, and no number is
 * handed out twice.
 */
class RangeCacheTest {
  private final ConcurrentLinkedQueue<Runnable> prefetches = new ConcurrentLinkedQueue<>();
  private final List<String> logged = new ArrayList<>();
  private final ExecutorService pool = Executors.newCachedThreadPool();

  @AfterEach
  void tearDown() {
    pool.shutdownNow();
  }

  /** A cache whose prefetches wait in {@link #prefetches} until the test runs them. */
  private RangeCache cache(RangeFetcher node, String collection, double prefetchAt) {
    RangeCache.Setup setup =
        new RangeCache.Setup(
            prefetchAt, Duration.ofSeconds(10), prefetches::add, this::log, System::nanoTime);
    return new RangeCache(collection, node, setup);
  }

  private synchronized void log(String line) {
    logged.add(line);
  }

  private UnusedReturns returns(ContractNode node) {
    return new UnusedReturns(node, pool, Duration.ofSeconds(5), Duration.ofSeconds(10));
  }

  private static void take(RangeCache cache, long first, long last) {
    for (long n = first; n <= last; n++) assertEquals(new Id(n, "A"), cache.next());
  }

  @Test
  void after_an_applied_return_the_next_range_continues_after_the_last_number_used() {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "ra", 0);
    take(c, 1, 5);
    returns(node).handBack(List.of(c), false);
    assertEquals(1, c.returnsApplied.get());
    // The node's Max is 5: its next range is 6-37, below the 32 the cache held, and is accepted.
    take(c, 6, 8);
    assertEquals(5, node.requests().get(1).getLastMax());
  }

  /**
   * Each request reports the range the cache got before it (CONTRACT.md R4), whichever node issued it:
   * after a failover from A, far ahead, to B, the request after B's first range reports B's 1-32, not
   * A's high (R17: B would refuse that on every request). Replies are still judged by each node's own
   * mark (R11): A's range below what the cache had of A is refused.
   */
  @Test
  void after_a_failover_the_request_reports_the_new_nodes_range() {
    List<NextRangeResponse> replies =
        List.of(reply(1001, 1032, "A"), reply(1, 32, "B"), reply(33, 96, "B"), reply(1020, 1051, "A"));
    List<NextRangeRequest> asked = new ArrayList<>();
    RangeFetcher nodes =
        new RangeFetcher() {
          @Override
          public synchronized Reply nextRange(
              NextRangeRequest request, Function<NextRangeResponse, String> check) {
            NextRangeResponse r = replies.get(asked.size());
            asked.add(request);
            String problem = check.apply(r);
            if (problem != null) throw new HiloException(Status.Code.INTERNAL, problem);
            return new Reply(r, r.getNodeTag().equals("A") ? 0 : 1);
          }

          @Override
          public List<ReturnOutcome> returnRanges(
              int target, List<ReturnRangeRequest> items, Deadline deadline) {
            throw new AssertionError("no return in this test");
          }

          @Override
          public String describe() {
            return "A, B";
          }
        };
    RangeCache c = cache(nodes, "fo", 0);
    for (long n = 1001; n <= 1032; n++) assertEquals(new Id(n, "A"), c.next());
    for (long n = 1; n <= 33; n++) assertEquals(new Id(n, "B"), c.next());
    assertEquals(1032, asked.get(1).getLastMax());
    assertEquals(32, asked.get(2).getLastSize());
    assertEquals(32, asked.get(2).getLastMax());
    for (long n = 34; n <= 96; n++) assertEquals(new Id(n, "B"), c.next());
    HiloException e = assertThrows(HiloException.class, c::next);
    assertEquals(Status.Code.INTERNAL, e.code());
    assertEquals(96, asked.get(3).getLastMax());
  }

  private static NextRangeResponse reply(long low, long high, String tag) {
    return NextRangeResponse.newBuilder()
        .setLow(low)
        .setHigh(high)
        .setNodeTag(tag)
        .setRangeToken(low)
        .setRangeAt(Timestamp.newBuilder().setSeconds(1_800_000_000L))
        .build();
  }

  /**
   * A cache's messages show its name through Names.quote: a caller's name of any length, holding a newline,
   * gives a short message with nothing raw, whether the caller waited too long for another's fetch or the
   * reply was refused.
   */
  @Test
  void messages_show_the_name_bounded_and_escaped() throws Exception {
    String name = "n".repeat(100_000) + "\n\u001b";
    CountDownLatch atNode = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    RangeFetcher node =
        new RangeFetcher() {
          @Override
          public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
            atNode.countDown();
            try {
              release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            throw new HiloException(Status.Code.INTERNAL, check.apply(reply(0, 31, "A")));  // low 0: refused
          }

          @Override
          public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
            throw new AssertionError("no return in this test");
          }

          @Override
          public String describe() {
            return "held";
          }
        };
    // A bound of 1 ms for a waiter: the fetch is held until the waiter has given up.
    RangeCache c = new RangeCache(
        name, node, new RangeCache.Setup(0, Duration.ofMillis(1), prefetches::add, this::log, System::nanoTime));
    CompletableFuture<HiloException> fetching =
        CompletableFuture.supplyAsync(() -> assertThrows(HiloException.class, c::next), pool);
    assertTrue(atNode.await(10, TimeUnit.SECONDS));
    HiloException waited = assertThrows(HiloException.class, c::next);
    release.countDown();
    HiloException refused = fetching.get(10, TimeUnit.SECONDS);
    assertEquals(Status.Code.DEADLINE_EXCEEDED, waited.code());
    assertEquals(Status.Code.INTERNAL, refused.code());
    for (HiloException e : List.of(waited, refused)) {
      String m = e.getMessage();
      assertTrue(m.length() < 400, "a message of " + m.length() + " chars");
      assertTrue(m.contains("\"" + "n".repeat(64) + "\"... (100002 characters)"), m);
      assertFalse(m.contains("\n") || m.contains("\u001b"), m);
    }
  }

  @Test
  void after_a_refused_return_none_of_the_range_is_used_again() {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "rr", 0);
    RangeCache other = cache(node, "rr", 0);
    take(c, 1, 5);
    take(other, 33, 33);
    returns(node).handBack(List.of(c), false);
    assertEquals(0, c.returnsApplied.get());
    assertEquals(1, c.returnsRefused.get());
    take(c, 65, 67);
  }

  @Test
  void after_a_return_whose_reply_was_lost_the_range_that_follows_it_is_accepted() {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "rf", 0);
    take(c, 1, 5);
    node.returnsLoseReplies = true;
    returns(node).handBack(List.of(c), false);
    node.returnsLoseReplies = false;
    assertEquals(1, c.returnsFailed.get());
    assertEquals(1, logged.size());
    // It applied at the node (Max 5): the cache's mark went down to 5 whatever the answer.
    take(c, 6, 8);
  }

  @Test
  void a_range_fetched_ahead_goes_back_whole_before_the_tail_and_both_apply() {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "rp", 0.2);
    take(c, 1, 7);  // the 7th (a fifth of 32) asks for the next range
    assertEquals(1, prefetches.size());
    prefetches.poll().run();
    assertEquals(1, c.rangesPrefetched.get());
    returns(node).handBack(List.of(c), false);
    assertEquals(2, c.returnsApplied.get());
    take(c, 8, 9);
  }

  @Test
  void callers_wait_for_a_return_and_then_fetch_after_it() throws Exception {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "rw", 0);
    take(c, 1, 5);
    CountDownLatch release = new CountDownLatch(1);
    node.holdReturns = release;
    CompletableFuture<Void> handBack = CompletableFuture.runAsync(() -> returns(node).handBack(List.of(c), false), pool);
    node.awaitReturnCalls(1);
    Thread[] caller = new Thread[1];
    CompletableFuture<Id> drawn =
        CompletableFuture.supplyAsync(
            () -> {
              caller[0] = Thread.currentThread();
              return c.next();
            },
            pool);
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (caller[0] == null || caller[0].getState() != Thread.State.TIMED_WAITING) {
      if (drawn.isDone()) fail("a caller got " + drawn.get() + " while the return was in flight");
      if (System.nanoTime() > end) fail("the caller never waited");
      Thread.onSpinWait();
    }
    assertEquals(1, node.requests().size());  // no fetch while the return is out
    release.countDown();
    handBack.get(10, TimeUnit.SECONDS);
    assertEquals(new Id(6, "A"), drawn.get(10, TimeUnit.SECONDS));
  }

  /**
   * A keep-open return whose ending throws (here: outcomes that do not match its ranges) still lets the
   * callers waiting for it go, at once and with a HiloException naming what happened; the next call fetches.
   */
  @Test
  void a_return_that_ends_in_a_throw_lets_its_waiters_go() throws Exception {
    ContractNode node = new ContractNode(32);
    RangeCache c = cache(node, "rt", 0);
    take(c, 1, 5);
    RangeCache.Unused unused = c.takeUnused(0, false);
    assertEquals(1, unused.items().size());
    CompletableFuture<HiloException> waiter =
        CompletableFuture.supplyAsync(() -> assertThrows(HiloException.class, c::next), pool);
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);  // under the cache's wait bound, 10 s
    while (c.callsWaited.get() < 2) {
      if (System.nanoTime() > end) fail("the caller never waited for the return");
      Thread.onSpinWait();
    }
    IndexOutOfBoundsException thrown =
        assertThrows(IndexOutOfBoundsException.class, () -> c.endReturn(unused, List.of()));
    HiloException e = waiter.get(5, TimeUnit.SECONDS);
    assertEquals(Status.Code.UNKNOWN, e.code());
    assertTrue(e.getMessage().contains("return of the ranges of \"rt\" failed: " + thrown), e.getMessage());
    take(c, 33, 34);  // nothing was handed back: the node's next range
  }

  /**
   * A cache whose first fetch is in flight is not forgotten (forgetIfUnused): it holds no range yet, but the
   * fetch may bring one, and callers wait for it; forgotten, it would drop the range the node issued. One
   * whose fetch failed, with nothing in flight, is.
   */
  @Test
  void a_cache_with_a_fetch_in_flight_is_not_forgotten() throws Exception {
    ContractNode node = new ContractNode(32);
    CountDownLatch atNode = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicBoolean fail = new AtomicBoolean();
    RangeFetcher held =
        new RangeFetcher() {
          @Override
          public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
            atNode.countDown();
            try {
              if (!release.await(10, TimeUnit.SECONDS)) throw new AssertionError("never let go");
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            if (fail.get()) throw new HiloException(Status.Code.UNAVAILABLE, "store busy");
            return node.nextRange(request, check);
          }

          @Override
          public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
            return node.returnRanges(target, items, deadline);
          }

          @Override
          public String describe() {
            return node.describe();
          }
        };
    RangeCache c = cache(held, "fl", 0);
    CompletableFuture<Id> first = CompletableFuture.supplyAsync(c::next, pool);
    assertTrue(atNode.await(10, TimeUnit.SECONDS));
    assertFalse(c.forgetIfUnused());
    release.countDown();
    assertEquals(new Id(1, "A"), first.get(10, TimeUnit.SECONDS));
    take(c, 2, 3);
    assertFalse(c.forgetIfUnused());  // it received a range
    // One whose fetch failed, nothing in flight and no range received, is forgotten.
    fail.set(true);
    RangeCache failing = cache(held, "fl2", 0);
    assertThrows(HiloException.class, failing::next);
    assertTrue(failing.forgetIfUnused());
  }

  /**
   * A fetch that fails with a throwable whose toString throws still lets the callers waiting for it go at
   * once (not after their bound, 10 s here), with a HiloException naming its class; the fetching caller
   * gets the throwable itself.
   */
  @Test
  void a_fetch_whose_throwable_cannot_be_shown_lets_its_waiters_go() throws Exception {
    class Unshowable extends RuntimeException {
      @Override
      public String toString() {
        throw new IllegalStateException("toString broke");
      }
    }
    Unshowable thrown = new Unshowable();
    CountDownLatch atNode = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    RangeFetcher node =
        new RangeFetcher() {
          @Override
          public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
            atNode.countDown();
            try {
              if (!release.await(10, TimeUnit.SECONDS)) throw new AssertionError("never let go");
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            throw thrown;
          }

          @Override
          public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
            throw new AssertionError("no return here");
          }

          @Override
          public String describe() {
            return "node";
          }
        };
    RangeCache c = cache(node, "ts", 0);
    CompletableFuture<Throwable> fetching =
        CompletableFuture.supplyAsync(() -> assertThrows(Throwable.class, c::next), pool);
    assertTrue(atNode.await(10, TimeUnit.SECONDS));
    CompletableFuture<HiloException> waiter =
        CompletableFuture.supplyAsync(() -> assertThrows(HiloException.class, c::next), pool);
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (c.callsWaited.get() < 2) {
      if (System.nanoTime() > end) fail("the caller never waited for the fetch");
      Thread.onSpinWait();
    }
    release.countDown();
    HiloException e = waiter.get(5, TimeUnit.SECONDS);  // well within the cache's wait bound, 10 s
    assertSame(thrown, fetching.get(5, TimeUnit.SECONDS));
    assertEquals(Status.Code.UNKNOWN, e.code());
    assertSame(thrown, e.getCause());
    assertTrue(e.getMessage().contains("fetch of the ranges of \"ts\" failed: " + Unshowable.class.getName()
        + " (whose toString threw java.lang.IllegalStateException)"), e.getMessage());
  }

  @Test
  void draws_racing_returns_never_hand_out_a_number_twice() throws Exception {
    ContractNode node = new ContractNode(64);
    ExecutorService prefetcher = Executors.newSingleThreadExecutor();
    RangeCache.Setup setup =
        new RangeCache.Setup(0.2, Duration.ofSeconds(10), prefetcher, this::log, System::nanoTime);
    // Two clients' caches of one collection: numbers one hands back wrongly, the other's next range gets.
    RangeCache c = new RangeCache("race", node, setup);
    RangeCache other = new RangeCache("race", node, setup);
    AtomicBoolean stop = new AtomicBoolean();
    List<CompletableFuture<List<Long>>> draws = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      RangeCache from = t % 2 == 0 ? c : other;
      draws.add(
          CompletableFuture.supplyAsync(
              () -> {
                List<Long> numbers = new ArrayList<>();
                while (!stop.get()) numbers.add(from.next().number());
                return numbers;
              },
              pool));
    }
    UnusedReturns returns = returns(node);
    for (int i = 0; i < 50; i++) {
      long fetched = c.rangesFetched.get() + other.rangesFetched.get();
      returns.handBack(List.of(c, other), false);
      // The next return once they have fetched again, so that each finds a range in use.
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (c.rangesFetched.get() + other.rangesFetched.get() == fetched && System.nanoTime() < end) {
        Thread.yield();
      }
    }
    stop.set(true);
    Set<Long> seen = new HashSet<>();
    for (CompletableFuture<List<Long>> d : draws) {
      for (long n : d.get(30, TimeUnit.SECONDS)) assertTrue(seen.add(n), n + " handed out twice");
    }
    // Every return was judged, and enough of them applied to matter.
    assertEquals(0, c.returnsFailed.get() + other.returnsFailed.get());
    assertTrue(c.returnsApplied.get() + other.returnsApplied.get() >= 10,
        "only " + (c.returnsApplied.get() + other.returnsApplied.get()) + " returns applied");
    prefetcher.shutdownNow();
  }

  /**
   * A return call that throws an Error (a ClientInterceptor's) is that return's failure, counted and
   * logged, and the hand-back throws nothing, alike whether the call ran on the executor or, the executor
   * refusing it, on the caller's thread. Nothing was sent, so the next range follows the one held.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void a_return_call_that_throws_an_error_is_a_failed_return_on_either_thread(boolean refused) {
    ContractNode node = new ContractNode(32);
    Error broke = new Error("interceptor broke");
    RangeFetcher throwing =
        new RangeFetcher() {
          @Override
          public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
            return node.nextRange(request, check);
          }

          @Override
          public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
            throw broke;
          }

          @Override
          public String describe() {
            return node.describe();
          }
        };
    Executor executor = refused ? r -> { throw new RejectedExecutionException("shut down"); } : pool;
    RangeCache c = cache(throwing, "re", 0);
    take(c, 1, 5);
    new UnusedReturns(throwing, executor, Duration.ofSeconds(5), Duration.ofSeconds(10)).handBack(List.of(c), false);
    assertEquals(1, c.returnsFailed.get());
    assertEquals(0, c.returnsApplied.get());
    assertEquals(1, logged.size(), logged.toString());
    assertTrue(logged.get(0).contains("UNKNOWN: the return call failed: " + broke), logged.get(0));
    take(c, 33, 34);
  }
}
