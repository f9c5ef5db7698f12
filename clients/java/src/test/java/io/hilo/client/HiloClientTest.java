package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.Status;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangesRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The client against in-process nodes that keep the server's rules (FakeHilo). */
class HiloClientTest {
  private FakeHilo a;
  private FakeHilo b;
  private ExecutorService callers;

  @BeforeEach
  void setUp() throws Exception {
    a = new FakeHilo("A");
    b = new FakeHilo("B");
    callers = Executors.newFixedThreadPool(16);
  }

  @AfterEach
  void tearDown() throws Exception {
    callers.shutdownNow();
    callers.awaitTermination(10, TimeUnit.SECONDS);
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

  private static List<NextRangeRequest> nextRanges(FakeHilo node) {
    List<NextRangeRequest> out = new ArrayList<>();
    for (Object c : node.calls()) if (c instanceof NextRangeRequest r) out.add(r);
    return out;
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

  /**
   * Starts n callers of nextId("orders") together and returns once every one is parked: one in the
   * NextRange call (held at node's gate), the others joined to its future.
   */
  private List<Future<Id>> parkedCallers(HiloClient client, FakeHilo node, int n) throws InterruptedException {
    node.gate = new CountDownLatch(1);
    CountDownLatch start = new CountDownLatch(1);
    List<Thread> threads = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Future<Id>> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ids.add(callers.submit(() -> {
        threads.add(Thread.currentThread());
        start.await();
        return client.nextId("orders");
      }));
    }
    await(n + " callers run", () -> threads.size() == n);
    start.countDown();
    await("one NextRange arrives", () -> node.nextRangeStarted.get() == 1);
    await("every caller is parked in the RPC or on the fetch's future", () -> {
      for (Thread t : List.copyOf(threads)) {
        boolean parked = false;
        for (StackTraceElement f : t.getStackTrace()) {
          parked |= f.getClassName().equals("java.util.concurrent.CompletableFuture")
              || f.getClassName().equals("io.grpc.stub.ClientCalls");
        }
        if (!parked) return false;
      }
      return true;
    });
    return ids;
  }

  @Test
  void one_next_range_when_many_threads_run_dry() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      List<Future<Id>> ids = parkedCallers(client, a, 16);
      a.gate.countDown();
      Set<Long> numbers = new HashSet<>();
      for (Future<Id> f : ids) {
        Id id = f.get(10, TimeUnit.SECONDS);
        assertEquals("A", id.nodeTag());
        assertTrue(numbers.add(id.number()), "number " + id.number() + " handed out twice");
      }
      assertEquals(1, nextRanges(a).size());
      for (long n = 1; n <= 16; n++) assertTrue(numbers.contains(n), "missing " + n);
      assertEquals(16, client.stats().callsWaited());
    }
  }

  @Test
  void waiters_share_the_fetch_error_and_do_not_fetch_again() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      a.failNextRange(Status.RESOURCE_EXHAUSTED.withDescription("disk full"));
      List<Future<Id>> results = parkedCallers(client, a, 8);
      a.gate.countDown();
      for (Future<Id> f : results) {
        java.util.concurrent.ExecutionException e =
            assertThrows(java.util.concurrent.ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        HiloException h = assertInstanceOf(HiloException.class, e.getCause());
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, h.code());
      }
      assertEquals(1, nextRanges(a).size());
      assertEquals(1L, client.stats().errors().get(Status.Code.RESOURCE_EXHAUSTED));
      assertEquals(8, client.stats().callsWaited());
      a.gate = null;
      assertEquals(new Id(1, "A"), client.nextId("orders"));  // the next caller fetches anew
    }
  }

  @Test
  void reports_its_previous_range_and_the_highest_number_seen() {
    long[] now = {1_000_000_000L};
    a.clock = () -> now[0];
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      for (int i = 0; i < 32; i++) client.nextId("orders");
      now[0] += 10_000;
      assertEquals(new Id(33, "A"), client.nextId("orders"));  // under 30 s: the size doubles
      List<NextRangeRequest> requests = nextRanges(a);
      assertEquals(2, requests.size());
      assertEquals(0, requests.get(0).getLastSize());
      assertEquals(0, requests.get(0).getLastMax());
      assertFalse(requests.get(0).hasLastRangeAt());
      assertEquals(32, requests.get(1).getLastSize());
      assertEquals(32, requests.get(1).getLastMax());
      assertEquals(1_000_000L, requests.get(1).getLastRangeAt().getSeconds());
      for (int i = 0; i < 63; i++) client.nextId("orders");
      now[0] += 61_000;
      assertEquals(new Id(97, "A"), client.nextId("orders"));  // over 60 s: it halves back to 32
      assertEquals(64, nextRanges(a).get(2).getLastSize());
      assertEquals(96, nextRanges(a).get(2).getLastMax());
      assertEquals(128, a.max("orders"));
    }
  }

  @Test
  void prefetches_at_a_fifth_and_switches_without_waiting() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).build()) {
      for (int i = 1; i <= 7; i++) assertEquals(i, client.nextId("orders").number());  // 7 = ceil(0.2 * 32)
      await("the prefetch lands", () -> client.stats().rangesPrefetched() == 1);
      for (int i = 8; i <= 32; i++) assertEquals(i, client.nextId("orders").number());
      Id next = client.nextId("orders");
      assertEquals(new Id(33, "A"), next);
      ClientStats stats = client.stats();
      assertEquals(2, stats.rangesFetched());
      assertEquals(1, stats.callsWaited());  // only the very first call
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

  @Test
  void prefetch_off_fetches_only_when_dry() {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      for (int i = 0; i < 32; i++) client.nextId("orders");
      assertEquals(1, nextRanges(a).size());
      assertEquals(0, client.stats().rangesPrefetched());
    }
  }

  @Test
  void close_returns_the_prefetched_range_whole_then_the_tail_in_one_call() throws Exception {
    HiloClient client = quiet().channel(a.channel).build();
    for (int i = 0; i < 10; i++) client.nextId("orders");
    await("the prefetch lands", () -> client.stats().rangesPrefetched() == 1);
    client.close();
    List<ReturnRangesRequest> batches = new ArrayList<>();
    for (Object c : a.calls()) if (c instanceof ReturnRangesRequest r) batches.add(r);
    assertEquals(1, batches.size());
    List<ReturnRangeRequest> items = batches.get(0).getReturnsList();
    assertEquals(2, items.size());
    assertEquals(96, items.get(0).getEnd());
    assertEquals(32, items.get(0).getLast());
    assertEquals(a.issued.get(1)[2], items.get(0).getRangeToken());
    assertEquals("A", items.get(0).getNodeTag());
    assertEquals(32, items.get(1).getEnd());
    assertEquals(10, items.get(1).getLast());
    assertEquals(a.issued.get(0)[2], items.get(1).getRangeToken());
    assertEquals(10, a.max("orders"));
    assertEquals(2, client.stats().returnsApplied());
    assertEquals(0, client.stats().returnsRefused());
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
  void a_return_after_another_client_took_a_range_is_refused_and_counted() {
    HiloClient first = quiet().channel(a.channel).prefetchAt(0).build();
    try (HiloClient second = quiet().channel(a.channel).prefetchAt(0).build()) {
      assertEquals(new Id(1, "A"), first.nextId("orders"));
      assertEquals(new Id(33, "A"), second.nextId("orders"));
      first.close();  // its 2-32 cannot come back: Max is 64
      assertEquals(0, first.stats().returnsApplied());
      assertEquals(1, first.stats().returnsRefused());
      assertEquals(64, a.max("orders"));
    }
  }

  @Test
  void a_closed_client_hands_out_nothing_and_leaves_a_callers_channel_open() {
    HiloClient client = quiet().channel(a.channel).prefetchAt(0).build();
    CollectionHandle orders = client.collection("orders");
    orders.nextId();
    client.close();
    client.close();  // a second close is harmless
    HiloException e = assertThrows(HiloException.class, orders::nextId);
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(HiloException.class, () -> client.nextId("x")).code());
    assertFalse(a.channel.isShutdown());
    assertEquals(1, a.max("orders"));
  }

  static List<UnaryOperator<NextRangeResponse>> badReplies() {
    return List.of(
        r -> r.toBuilder().setNodeTag("ab!").build(),
        r -> r.toBuilder().setNodeTag("").build(),
        r -> r.toBuilder().setNodeTag("ABCDE").build(),
        r -> r.toBuilder().setNodeTag("a").build(),
        r -> r.toBuilder().setLow(0).build(),
        r -> r.toBuilder().setHigh(r.getLow() - 1).build());
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 2, 3, 4, 5})
  void a_reply_that_breaks_the_contract_is_internal_and_never_used(int which) {
    a.corrupt = badReplies().get(which);
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId("orders"));
      assertEquals(Status.Code.INTERNAL, e.code());
      assertTrue(e.getMessage().contains("no hilo server gave a usable range of \"orders\""), e.getMessage());
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {0, 1, 2, 3, 4, 5})
  void a_bad_reply_sends_the_client_to_the_next_target(int which) {
    a.corrupt = badReplies().get(which);
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).prefetchAt(0).build()) {
      assertEquals(new Id(1, "B"), client.nextId("orders"));
      assertEquals(1, client.stats().failovers());
    }
  }

  @Test
  void a_range_not_above_the_last_one_from_that_node_is_refused() {
    try (HiloClient client = quiet().channel(a.channel).prefetchAt(0).build()) {
      for (int i = 0; i < 32; i++) client.nextId("orders");
      a.corrupt = r -> r.toBuilder().setLow(20).setHigh(40).build();  // overlaps 1-32
      HiloException e = assertThrows(HiloException.class, () -> client.nextId("orders"));
      assertEquals(Status.Code.INTERNAL, e.code());
      assertTrue(e.getMessage().contains("does not lie above 32"), e.getMessage());
      a.corrupt = UnaryOperator.identity();
      Id id = client.nextId("orders");
      assertTrue(id.number() > 40, "got " + id);
    }
  }

  @Test
  void fails_over_on_unavailable_and_stays_with_the_target_that_answered() {
    a.failNextRange(Status.UNAVAILABLE.withDescription("down"));
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).prefetchAt(0).build()) {
      assertEquals(new Id(1, "B"), client.nextId("orders"));
      for (int i = 0; i < 31; i++) client.nextId("orders");
      assertEquals(new Id(33, "B"), client.nextId("orders"));  // b again: a is not asked
      assertEquals(1, nextRanges(a).size());
      assertEquals(2, nextRanges(b).size());
      assertEquals(1, client.stats().failovers());
    }
  }

  @Test
  void every_number_keeps_the_tag_of_its_own_range_across_failover() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).build()) {
      for (int i = 0; i < 7; i++) assertEquals("A", client.nextId("orders").nodeTag());
      await("the prefetch lands", () -> client.stats().rangesPrefetched() == 1);  // 33-96 from A
      a.failNextRange(Status.UNAVAILABLE);
      // 45 is a fifth into 33-96: its taker starts the next prefetch, which A fails and B answers.
      for (int i = 8; i <= 45; i++) assertEquals(new Id(i, "A"), client.nextId("orders"));
      await("the second prefetch lands (from B)", () -> client.stats().rangesPrefetched() == 2);
      // B's range waits aside; the rest of A's range still carries A.
      for (int i = 46; i <= 96; i++) assertEquals(new Id(i, "A"), client.nextId("orders"));
      Id next = client.nextId("orders");
      assertEquals("B", next.nodeTag());
      assertEquals(97, next.number());
    }
  }

  @Test
  void unavailable_everywhere_names_every_target() {
    a.failNextRange(Status.UNAVAILABLE.withDescription("a is down"));
    b.failNextRange(Status.DEADLINE_EXCEEDED.withDescription("b is slow"));
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).prefetchAt(0).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId("orders"));
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertTrue(e.getMessage().contains("a is down") && e.getMessage().contains("b is slow"), e.getMessage());
      assertEquals(new Id(1, "A"), client.nextId("orders"));  // recovers by itself
    }
  }

  @Test
  void a_server_error_is_not_failed_over() {
    try (HiloClient client = quiet().channel(a.channel).channel(b.channel).prefetchAt(0).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId(""));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
      assertEquals(0, nextRanges(b).size());
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

  @Test
  void many_threads_on_many_ranges_never_get_a_number_twice() throws Exception {
    try (HiloClient client = quiet().channel(a.channel).build()) {
      CollectionHandle orders = client.collection("orders");
      CountDownLatch start = new CountDownLatch(1);
      List<Future<List<Long>>> parts = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        parts.add(callers.submit(() -> {
          start.await();
          List<Long> mine = new ArrayList<>();
          for (int i = 0; i < 5000; i++) {
            Id id = orders.nextId();
            assertEquals("A", id.nodeTag());
            mine.add(id.number());
          }
          return mine;
        }));
      }
      start.countDown();
      Set<Long> all = new HashSet<>();
      for (Future<List<Long>> p : parts) for (long n : p.get(60, TimeUnit.SECONDS)) assertTrue(all.add(n), "twice: " + n);
      assertEquals(40_000, all.size());
      // Every number handed out lies in a range the node issued.
      for (long n : all) {
        boolean inside = false;
        for (long[] r : a.issued) inside |= n >= r[0] && n <= r[1];
        assertTrue(inside, n + " is in no issued range");
      }
    }
  }
}
