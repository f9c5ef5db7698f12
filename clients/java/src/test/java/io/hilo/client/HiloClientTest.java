package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.hilo.v1.HiLoGrpc;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangesRequest;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The client through FakeHilo (a real hilo_server behind a hook layer), for what the conformance suite
 * cannot show: held and failed calls, the ReturnRange fallback, and the Java API's own promises.
 */
class HiloClientTest {
  private FakeHilo a;
  private FakeHilo b;

  @BeforeEach
  void setUp() throws Exception {
    a = new FakeHilo("A");
    b = new FakeHilo("B");
  }

  @AfterEach
  void tearDown() throws Exception {
    a.close();
    b.close();
  }

  private static HiloClient.Builder quiet() {
    return HiloClient.builder().log(line -> {}).rpcDeadline(Duration.ofSeconds(5));
  }

  /** Waits (bounded) until `done` holds; fails the test otherwise. */
  private static void await(String what, BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) fail("timed out waiting until " + what);
      Thread.sleep(2);
    }
  }

  @Test
  void hands_out_a_range_in_order_with_its_tag() {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      assertEquals(new Id(1, "A"), client.nextId("orders"));
      assertEquals("orders/2-A", client.nextDocumentId("orders"));
      assertEquals("orders/3-A", client.collection("orders").nextDocumentId());
      assertEquals(new Id(1, "A"), client.nextId("users"));
    }
  }

  /** The runway (ClientStats.runway): what the client holds, at the rate it handed numbers out lately. */
  @Test
  void runway_is_the_numbers_held_at_the_recent_rate() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).build()) {
      long[] now = {1_000_000_000L};
      client.setNanoClockForTesting(() -> now[0]);
      assertNull(client.stats().runway().get("r"));  // nothing held
      client.nextId("r");
      assertNull(client.stats().runway().get("r"));  // no time passed
      now[0] += 1_000_000_000L;
      assertEquals(31.0, seconds(client.stats().runway().get("r")), 1e-6);  // 31 at 1 a second
      for (int i = 2; i <= 10; i++) client.nextId("r");  // the 7th asks for the next range
      await("the prefetch lands", () -> client.stats().rangesPrefetched() == 1);
      long ahead = a.max("r") - 32;
      assertEquals((22.0 + ahead) / 10, seconds(client.stats().runway().get("r")), 1e-6);
      now[0] += 1_000_000_000L;
      for (int i = 11; i <= 33; i++) client.nextId("r");
      // The range ahead took over; the window began with 1-32: 33 numbers in 2 s.
      assertEquals((ahead - 1) * 2.0 / 33, seconds(client.stats().runway().get("r")), 1e-6);
      now[0] += 2_000_000_000L;
      assertEquals((ahead - 1) * 4.0 / 33, seconds(client.stats().runway().get("r")), 1e-6);
      client.close();
      assertNull(client.stats().runway().get("r"));  // handed back
    }
  }

  private static double seconds(java.time.Duration d) {
    return d.toNanos() / 1e9;
  }

  /** The keep-open return (CONTRACT.md R8): ranges go back, the client stays, close still hands back. */
  @Test
  void return_unused_ranges_keeps_the_client_and_close_hands_back_the_next_range() {
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).build();
    for (int i = 0; i < 5; i++) client.nextId("orders");
    client.returnUnusedRanges();
    assertEquals(5, a.max("orders"));
    assertEquals(new Id(6, "A"), client.nextId("orders"));
    client.close();
    assertEquals(6, a.max("orders"));
    assertEquals(2, client.stats().returnsApplied());
    client.returnUnusedRanges();  // after close: nothing to do, nothing thrown
    assertEquals(2, client.stats().returnsApplied());
    HiloException e = assertThrows(HiloException.class, () -> client.nextId("orders"));
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
  }

  @Test
  void close_falls_back_to_return_range_in_the_same_order() throws Exception {
    a.returnRangesUnimplemented = true;
    HiloClient client = quiet().channel(a.channel).build();
    for (int i = 0; i < 10; i++) client.nextId("orders");
    await("the prefetch lands", () -> client.stats().rangesPrefetched() == 1);
    client.close();
    List<ReturnRangeRequest> singles = new ArrayList<>();
    for (Object c : a.calls()) if (c instanceof ReturnRangeRequest r) singles.add(r);
    assertEquals(2, singles.size());
    assertEquals(96, singles.get(0).getEnd());
    assertEquals(32, singles.get(0).getLast());
    assertEquals(32, singles.get(1).getEnd());
    assertEquals(10, singles.get(1).getLast());
    assertEquals(10, a.max("orders"));
    assertEquals(2, client.stats().returnsApplied());
  }

  @Test
  void close_retries_a_return_after_unavailable() {
    a.failReturnRanges(Status.UNAVAILABLE.withDescription("store busy"));
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).build();
    for (int i = 0; i < 5; i++) client.nextId("orders");
    client.close();
    long batches = a.calls().stream().filter(c -> c instanceof ReturnRangesRequest).count();
    assertEquals(2, batches);
    assertEquals(5, a.max("orders"));
    assertEquals(1, client.stats().returnsApplied());
    assertEquals(0, client.stats().returnsFailed());
  }

  @Test
  void close_counts_a_return_that_keeps_failing_and_does_not_throw() {
    for (int i = 0; i < Targets.RETURN_ATTEMPTS; i++) a.failReturnRanges(Status.UNAVAILABLE);
    List<String> log = new ArrayList<>();
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).log(log::add).build();
    client.nextId("orders");
    client.close();
    assertEquals(1, client.stats().returnsFailed());
    assertEquals(1L, client.stats().errors().get(Status.Code.UNAVAILABLE));
    assertEquals(1, log.size());
    assertTrue(log.get(0).contains("returning numbers 2-32 of collection \"orders\" failed"), log.get(0));
  }

  /** A log line names the collection escaped: a line separator or a bidi override in a name is not written raw. */
  @Test
  void a_failed_return_logs_the_name_escaped() {
    for (int i = 0; i < Targets.RETURN_ATTEMPTS; i++) a.failReturnRanges(Status.UNAVAILABLE);
    List<String> log = new ArrayList<>();
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).log(log::add).build();
    client.nextId("line\u2028break\u202Eevil");  // a name the server takes
    client.close();
    assertEquals(1, log.size());
    assertTrue(log.get(0).contains("of collection \"line\\u2028break\\u202Eevil\" failed"), log.get(0));
    assertTrue(log.get(0).chars().noneMatch(c -> c == 0x2028 || c == 0x202E), log.get(0));
  }

  @Test
  void close_gives_up_on_a_node_that_does_not_answer_within_the_deadline() {
    a.returnGate = new CountDownLatch(1);
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).rpcDeadline(Duration.ofMillis(300)).build();
    client.nextId("orders");
    long start = System.nanoTime();
    client.close();
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    a.returnGate.countDown();
    // Bounded by closeTimeout (2 x rpcDeadline) and a little slack, never by the node.
    assertTrue(tookMillis < 3_000, "close took " + tookMillis + " ms");
    assertEquals(1, client.stats().returnsFailed());
    assertEquals(1L, client.stats().errors().get(Status.Code.DEADLINE_EXCEEDED));
  }

  @Test
  void a_closed_client_hands_out_nothing_and_leaves_a_callers_channel_open() {
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).build();
    CollectionHandle orders = client.collection("orders");
    CollectionHandle neverCalled = client.collection("never");
    orders.nextId();
    client.close();
    client.close();  // a second close is harmless
    HiloException e = assertThrows(HiloException.class, orders::nextId);
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(HiloException.class, () -> client.nextId("x")).code());
    // Handles made before close and never called, or made after it, fail alike and keep nothing.
    CollectionHandle late = client.collection("late");
    assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(HiloException.class, neverCalled::nextId).code());
    assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(HiloException.class, late::nextDocumentId).code());
    assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(HiloException.class, late::nextId).code());
    assertEquals(Set.of("orders"), client.collectionsForTesting());
    assertEquals(1, client.stats().callsWaited());
    assertFalse(a.channel.isShutdown());
    assertEquals(1, a.max("orders"));
  }

  @Test
  void a_server_error_is_not_failed_over() {
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).prefetchAt(0).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId(""));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals(0, b.calls().size());
    }
  }

  /**
   * Another caller's failure has just forgotten a collection that never received a range, and has not
   * dropped it from the table yet: a caller that finds it there, or holds it in a handle, gets a number from
   * a fresh cache, and the failure is counted once. Each way in: nextId, nextDocumentId, a handle's two.
   */
  @Test
  void a_caller_that_finds_a_forgotten_collection_looks_it_up_again() {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      List<RangeCache> forgotten = new ArrayList<>();
      for (int way = 0; way < 4; way++) {
        String name = "late" + way;
        CollectionHandle handle = client.collection(name);
        RangeCache late = client.cacheForTesting(name);
        a.failNextRange(Status.UNAVAILABLE.withDescription("store busy"));
        // The other caller: its call fails, then it forgets the cache (but does not drop it).
        assertEquals(Status.Code.UNAVAILABLE, assertThrows(HiloException.class, late::next).code());
        assertTrue(late.forgetIfUnused());
        assertTrue(client.collectionsForTesting().contains(name));  // still in the table
        if (way == 0) assertEquals(new Id(1, "A"), client.nextId(name));
        if (way == 1) assertEquals(name + "/1-A", client.nextDocumentId(name));
        if (way == 2) assertEquals(new Id(1, "A"), handle.nextId());
        if (way == 3) assertEquals(name + "/1-A", handle.nextDocumentId());
        // Whoever asks next draws from the same fresh cache.
        assertEquals(new Id(2, "A"), handle.nextId());
        assertEquals(new Id(3, "A"), client.nextId(name));
        assertNotSame(late, client.cacheForTesting(name));
        forgotten.add(late);
      }
      assertEquals(Set.of("late0", "late1", "late2", "late3"), client.collectionsForTesting());
      // A forgotten cache fetches nothing and hands nothing out, whoever asks.
      int calls = a.calls().size();
      for (RangeCache late : forgotten) assertThrows(RangeCache.Forgotten.class, late::next);
      assertEquals(calls, a.calls().size());
      ClientStats stats = client.stats();
      assertEquals(Map.of(Status.Code.UNAVAILABLE, 4L), stats.errors());
      assertEquals(8, stats.callsWaited());  // each failed call, and each first call on the fresh cache
      assertEquals(4, stats.rangesFetched());
      // Dropping one again (another caller that found it) moves nothing twice.
      assertEquals(client.cacheForTesting("late0"), client.lookUpAgain(forgotten.get(0)));
      assertEquals(Map.of(Status.Code.UNAVAILABLE, 4L), client.stats().errors());
      assertEquals(8, client.stats().callsWaited());
      // One that received a range is never forgotten.
      assertFalse(client.cacheForTesting("late0").forgetIfUnused());
    }
  }

  /**
   * Handles made before another caller's failed call forgot their collection still work: one never called
   * before, and one whose first call waited for that failed fetch (and got its error). Both then draw from
   * the collection's fresh cache, as the client's own calls do.
   */
  @Test
  void handles_made_before_a_failed_call_forgot_their_collection_still_work() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(2);
    // The fetch is held until the test lets it go: its deadline, and the gate's, outlast the spin's bound.
    try (HiloClient client = quiet().rpcDeadline(Duration.ofSeconds(60)).channel(a.channel).prefetchAt(0).build()) {
      CollectionHandle notCalled = client.collection("f");
      CollectionHandle waiting = client.collection("f");
      a.gate = new CountDownLatch(1);
      a.failNextRange(Status.UNAVAILABLE.withDescription("store busy"));
      Future<Status.Code> other = pool.submit(() -> codeOf(() -> client.nextId("f")));
      spinUntil("the other caller's fetch is at the node", () -> a.nextRangeStarted.get() == 1);
      Future<Status.Code> joined = pool.submit(() -> codeOf(waiting::nextId));
      spinUntil("the handle waits for that fetch", () -> client.stats().callsWaited() == 2);
      a.gate.countDown();
      assertEquals(Status.Code.UNAVAILABLE, other.get(10, TimeUnit.SECONDS));
      assertEquals(Status.Code.UNAVAILABLE, joined.get(10, TimeUnit.SECONDS));
      assertEquals(Set.of(), client.collectionsForTesting());  // forgotten
      a.gate = null;
      assertEquals(new Id(1, "A"), notCalled.nextId());
      assertEquals(Set.of("f"), client.collectionsForTesting());
      assertEquals("f/2-A", waiting.nextDocumentId());
      assertEquals(new Id(3, "A"), client.nextId("f"));
      assertEquals(new Id(4, "A"), waiting.nextId());
      assertEquals(Map.of(Status.Code.UNAVAILABLE, 1L), client.stats().errors());
      assertEquals(1, client.stats().rangesFetched());
    } finally {
      pool.shutdownNow();
    }
  }

  private static Status.Code codeOf(Runnable call) {
    try {
      call.run();
      return Status.Code.OK;
    } catch (HiloException e) {
      return e.code();
    }
  }

  /**
   * Spins until `done` holds; fails the test after 10 s, which is less than the hold of a call held at
   * FakeHilo (30 s) or at a ThrowingInterceptor, and than the deadline of a held call (60 s).
   */
  private static void spinUntil(String what, BooleanSupplier done) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) fail("timed out waiting until " + what);
      Thread.onSpinWait();
    }
  }

  /**
   * A collection that received a range is kept whatever fails later, even holding no range (handed back):
   * its next request must still report the previous one (CONTRACT.md R4) and the numbers it handed out.
   */
  @Test
  void a_collection_that_received_a_range_is_never_forgotten() {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      for (int i = 1; i <= 5; i++) assertEquals(new Id(i, "A"), client.nextId("orders"));
      RangeCache orders = client.cacheForTesting("orders");
      client.returnUnusedRanges();
      a.failNextRange(Status.RESOURCE_EXHAUSTED.withDescription("full"));
      assertEquals(Status.Code.RESOURCE_EXHAUSTED,
          assertThrows(HiloException.class, () -> client.nextId("orders")).code());
      assertEquals(Set.of("orders"), client.collectionsForTesting());
      assertFalse(orders.forgetIfUnused());
      assertEquals(new Id(6, "A"), client.nextId("orders"));
      assertEquals(orders, client.cacheForTesting("orders"));
      List<NextRangeRequest> requests = new ArrayList<>();
      for (Object c : a.calls()) if (c instanceof NextRangeRequest r) requests.add(r);
      assertEquals(3, requests.size());
      assertEquals(5, requests.get(2).getLastMax());  // the return applied: the last number handed out
      assertEquals(Map.of(Status.Code.RESOURCE_EXHAUSTED, 1L), client.stats().errors());
    }
  }

  /**
   * Callers waiting for one fetch of a new collection that fails all get its error; the collection is
   * forgotten once, its one error and every caller's wait counted once, and the next call starts afresh.
   * The fetch is held at the node until every caller waits: its deadline (60 s) and the node's hold (30 s)
   * outlast the spin's bound (10 s), so that it is the node's error the callers get, however slow the
   * machine, and a caller that returns early ends the spin at once.
   */
  @Test
  void waiters_on_a_failed_first_fetch_leave_nothing_behind() throws Exception {
    int callers = 4;
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    try (HiloClient client = quiet().rpcDeadline(Duration.ofSeconds(60)).channel(a.channel).prefetchAt(0).build()) {
      a.gate = new CountDownLatch(1);
      a.failNextRange(Status.UNAVAILABLE.withDescription("store busy"));
      List<Future<HiloException>> calls = new ArrayList<>();
      for (int i = 0; i < callers; i++) {
        boolean handle = i % 2 == 0;
        calls.add(pool.submit(() -> failureOf(() -> {
          if (handle) client.collection("w").nextId();
          else client.nextId("w");
        })));
      }
      // Every caller waits (callsWaited counts a caller as it begins to wait), one of them on the node.
      spinUntil("the callers all wait", () -> {
        if (calls.stream().anyMatch(Future::isDone)) fail("a caller returned before the fetch was let go");
        return client.stats().callsWaited() == callers && a.nextRangeStarted.get() == 1;
      });
      a.gate.countDown();
      for (Future<HiloException> f : calls) {
        HiloException e = f.get(10, TimeUnit.SECONDS);
        assertEquals(Status.Code.UNAVAILABLE, e.code());
        assertTrue(e.getMessage().contains("store busy"), e.getMessage());  // the node's error, not a deadline
      }
      assertEquals(Set.of(), client.collectionsForTesting());
      ClientStats stats = client.stats();
      assertEquals(Map.of(Status.Code.UNAVAILABLE, 1L), stats.errors());
      assertEquals(callers, stats.callsWaited());
      a.gate = null;
      assertEquals(new Id(1, "A"), client.nextId("w"));
      assertEquals(2, a.nextRangeStarted.get());  // the failed fetch and this one
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A real ClientInterceptor that, when armed, throws what {@link #next} holds at the next call of its
   * method, on the caller's thread as a broken interceptor of an application would, after holding the call
   * until the test lets it go ({@link #hold}).
   */
  private static final class ThrowingInterceptor implements ClientInterceptor {
    private final String method;
    final AtomicReference<Throwable> next = new AtomicReference<>();
    volatile CountDownLatch hold;
    final AtomicInteger entered = new AtomicInteger();

    ThrowingInterceptor(MethodDescriptor<?, ?> method) {
      this.method = method.getFullMethodName();
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> m, CallOptions options, Channel channel) {
      Throwable t = m.getFullMethodName().equals(method) ? next.getAndSet(null) : null;
      if (t == null) return channel.newCall(m, options);
      entered.incrementAndGet();
      CountDownLatch h = hold;
      try {
        if (h != null && !h.await(30, TimeUnit.SECONDS)) throw new AssertionError("never let go");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      throw HiloClientTest.<RuntimeException>sneaky(t);  // a checked one too, as Kotlin code may throw it
    }
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
    throw (T) t;
  }

  private static HiloException failureOf(Runnable call) {
    try {
      call.run();
      return null;
    } catch (HiloException e) {
      return e;
    }
  }

  /**
   * A fetch that fails with something other than a HiloException (an interceptor's RuntimeException, an
   * Error) leaves nothing in flight: the thrown thing reaches the caller that fetched, the callers waiting
   * for that fetch get a HiloException naming it (at once, not after their bound), the collection is
   * forgotten as after any failure, and the next call fetches at once.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void a_fetch_that_throws_something_else_fails_its_waiters_and_leaves_nothing_in_flight(boolean error)
      throws Exception {
    ThrowingInterceptor broken = new ThrowingInterceptor(HiLoGrpc.getNextRangeMethod());
    Throwable thrown = error ? new Error("interceptor broke") : new IllegalStateException("interceptor broke");
    ExecutorService pool = Executors.newFixedThreadPool(3);
    // A waiter's bound (2 x 60 s) outlasts the test's own bounds: a waiter left waiting fails the test.
    try (HiloClient client = quiet().rpcDeadline(Duration.ofSeconds(60))
        .channel(ClientInterceptors.intercept(a.channel, broken)).prefetchAt(0).build()) {
      broken.hold = new CountDownLatch(1);
      broken.next.set(thrown);
      Future<Id> fetching = pool.submit(() -> client.nextId("t"));
      spinUntil("the fetch is at the interceptor", () -> broken.entered.get() == 1);
      List<Future<HiloException>> waiters = List.of(
          pool.submit(() -> failureOf(() -> client.collection("t").nextId())),
          pool.submit(() -> failureOf(() -> client.nextDocumentId("t"))));
      spinUntil("both callers wait for that fetch", () -> client.stats().callsWaited() == 3);
      broken.hold.countDown();
      ExecutionException e = assertThrows(ExecutionException.class, () -> fetching.get(10, TimeUnit.SECONDS));
      assertSame(thrown, e.getCause());
      for (Future<HiloException> w : waiters) {
        HiloException h = w.get(10, TimeUnit.SECONDS);
        assertEquals(Status.Code.UNKNOWN, h.code());
        assertTrue(h.getMessage().contains("fetch of the ranges of \"t\" failed: " + thrown), h.getMessage());
        assertSame(thrown, h.getCause());
      }
      assertEquals(Set.of(), client.collectionsForTesting());
      assertEquals(Map.of(Status.Code.UNKNOWN, 1L), client.stats().errors());
      assertEquals(new Id(1, "A"), pool.submit(() -> client.nextId("t")).get(10, TimeUnit.SECONDS));
      // With no caller waiting: the one that fetched forgets the collection, as after any failure.
      broken.hold = null;
      broken.next.set(thrown);
      assertSame(thrown, assertThrows(thrown.getClass(), () -> client.nextId("alone")));
      assertEquals(Set.of("t"), client.collectionsForTesting());
      assertEquals(new Id(1, "A"), client.nextId("alone"));
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A checked exception thrown undeclared (a Kotlin interceptor's IOException) is, like any other failure,
   * counted (UNKNOWN) and forgets the collection that never received a range: many names grow nothing.
   */
  @Test
  void a_fetch_that_throws_a_checked_exception_undeclared_is_counted_and_forgets_the_collection() {
    ThrowingInterceptor broken = new ThrowingInterceptor(HiLoGrpc.getNextRangeMethod());
    try (HiloClient client = quiet().channel(ClientInterceptors.intercept(a.channel, broken)).prefetchAt(0).build()) {
      for (int i = 0; i < 20; i++) {
        IOException thrown = new IOException("kotlin interceptor " + i);
        broken.next.set(thrown);
        String name = "n" + i;
        Executable call = switch (i % 4) {
          case 0 -> () -> client.nextId(name);
          case 1 -> () -> client.nextDocumentId(name);
          case 2 -> () -> client.collection(name).nextId();
          default -> () -> client.collection(name).nextDocumentId();
        };
        assertSame(thrown, assertThrows(IOException.class, call));
      }
      assertEquals(Set.of(), client.collectionsForTesting());
      assertEquals(Map.of(Status.Code.UNKNOWN, 20L), client.stats().errors());
      assertEquals(new Id(1, "A"), client.nextId("n0"));
    }
  }

  /**
   * As a fetch: a prefetch that throws something else fails the callers waiting for it, at once; it is
   * counted and logged (not thrown on the executor's thread), and the next caller fetches.
   */
  @Test
  void a_prefetch_that_throws_something_else_fails_its_waiters_and_leaves_nothing_in_flight() throws Exception {
    ThrowingInterceptor broken = new ThrowingInterceptor(HiLoGrpc.getNextRangeMethod());
    RuntimeException thrown = new IllegalStateException("interceptor broke");
    List<String> lines = Collections.synchronizedList(new ArrayList<>());
    ExecutorService pool = Executors.newFixedThreadPool(1);
    try (HiloClient client = quiet().log(lines::add).rpcDeadline(Duration.ofSeconds(60))
        .channel(ClientInterceptors.intercept(a.channel, broken)).build()) {
      assertEquals(new Id(1, "A"), client.nextId("p"));
      broken.hold = new CountDownLatch(1);
      broken.next.set(thrown);
      for (long n = 2; n <= 32; n++) assertEquals(new Id(n, "A"), client.nextId("p"));  // the 7th prefetches
      spinUntil("the prefetch is at the interceptor", () -> broken.entered.get() == 1);
      Future<HiloException> waiter = pool.submit(() -> failureOf(() -> client.nextId("p")));
      spinUntil("a caller waits for the prefetch", () -> client.stats().callsWaited() == 2);
      broken.hold.countDown();
      HiloException h = waiter.get(10, TimeUnit.SECONDS);
      assertEquals(Status.Code.UNKNOWN, h.code());
      assertTrue(h.getMessage().contains("prefetch of the ranges of \"p\" failed: " + thrown), h.getMessage());
      assertSame(thrown, h.getCause());
      assertEquals(new Id(33, "A"), pool.submit(() -> client.nextId("p")).get(10, TimeUnit.SECONDS));
      assertEquals(Map.of(Status.Code.UNKNOWN, 1L), client.stats().errors());
      await("the prefetch's failure is logged", () -> !lines.isEmpty());
      assertEquals(List.of("hilo: prefetching a range of \"p\" failed: " + thrown), lines);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * A keep-open return leaves no caller waiting, whatever throws: an interceptor's RuntimeException is each
   * return's failure (logged and counted, CONTRACT.md R13), and a log that throws on every line reaches
   * neither the caller of returnUnusedRanges nor of close, nor stops another collection's return.
   */
  @Test
  void a_return_that_throws_or_logs_a_throw_leaves_no_caller_waiting() throws Exception {
    ThrowingInterceptor broken = new ThrowingInterceptor(HiLoGrpc.getReturnRangesMethod());
    List<String> lines = Collections.synchronizedList(new ArrayList<>());
    RuntimeException logBroke = new IllegalStateException("log broke");
    Consumer<String> log = line -> {
      lines.add(line);
      throw logBroke;
    };
    ExecutorService pool = Executors.newFixedThreadPool(1);
    try (HiloClient client = quiet().rpcDeadline(Duration.ofSeconds(60)).log(log)
        .channel(ClientInterceptors.intercept(a.channel, broken)).prefetchAt(0).build()) {
      assertEquals(new Id(1, "A"), client.nextId("r1"));
      assertEquals(new Id(1, "A"), client.nextId("r2"));
      broken.next.set(new IllegalStateException("interceptor broke"));
      client.returnUnusedRanges();
      assertEquals(2, lines.size());
      for (String line : lines) {
        assertTrue(line.contains("failed: UNKNOWN: the return call failed: java.lang.IllegalStateException:"
            + " interceptor broke"), line);
      }
      assertEquals(2, client.stats().returnsFailed());
      assertEquals(Map.of(Status.Code.UNKNOWN, 2L), client.stats().errors());
      // Nothing was sent: the node's Max is still 32, and each collection fetches its next range at once.
      assertEquals(new Id(33, "A"), pool.submit(() -> client.nextId("r1")).get(10, TimeUnit.SECONDS));
      assertEquals(new Id(33, "A"), pool.submit(() -> client.nextId("r2")).get(10, TimeUnit.SECONDS));
      // close's returns fail and log the same way: it throws nothing either, and both are counted.
      broken.next.set(new IllegalStateException("interceptor broke"));
      client.close();
      assertEquals(4, lines.size());
      assertEquals(4, client.stats().returnsFailed());
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest
  @ValueSource(chars = {'|', '-', '0', '1', '5', '9'})
  void refuses_a_separator_that_would_make_ids_ambiguous(char separator) {
    HiloException e =
        assertThrows(HiloException.class, () -> quiet().channel(a.channel).separator(separator).build());
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("separator '" + separator + "'"), e.getMessage());
  }

  @Test
  void takes_another_separator() {
    try (HiloClient client = quiet().channel(a.channel).separator(':').build()) {
      assertEquals("orders:1-A", client.nextDocumentId("orders"));
    }
  }

  @Test
  void refuses_bad_options() {
    assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(HiloException.class, () -> quiet().build()).code());
    assertEquals(Status.Code.INVALID_ARGUMENT,
        assertThrows(HiloException.class, () -> quiet().channel(a.channel).prefetchAt(1).build()).code());
    assertEquals(Status.Code.INVALID_ARGUMENT,
        assertThrows(HiloException.class, () -> quiet().channel(a.channel).rpcDeadline(Duration.ZERO).build()).code());
    assertEquals(Status.Code.INVALID_ARGUMENT,
        assertThrows(HiloException.class,
            () -> quiet().channel(a.channel).connectTimeout(Duration.ofSeconds(-1)).build()).code());
  }

}
