package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The client against real hilo_server processes (HILO_SERVER_BIN). */
class RealServerTest {
  private static final Pattern DOCUMENT_ID = Pattern.compile("orders/([1-9][0-9]*)-([A-Z0-9]{1,4})");

  private final List<ServerProcess> servers = new ArrayList<>();
  private ExecutorService callers;

  @BeforeEach
  void setUp() {
    callers = Executors.newFixedThreadPool(8);
  }

  @AfterEach
  void tearDown() throws Exception {
    callers.shutdownNow();
    callers.awaitTermination(10, TimeUnit.SECONDS);
    for (ServerProcess s : servers) s.close();
  }

  private ServerProcess start(String tag, String... flags) throws Exception {
    ServerProcess s = ServerProcess.start(tag, flags);
    servers.add(s);
    return s;
  }

  private static HiloClient.Builder quiet() {
    return HiloClient.builder().log(line -> {});
  }

  @Test
  void seed_sequence_then_a_second_client_gets_the_next_range() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient first = quiet().targets(a.target()).prefetchAt(0).build();
        HiloClient second = quiet().targets(a.target()).prefetchAt(0).build()) {
      assertEquals("orders/1-A", first.nextDocumentId("orders"));
      assertEquals(new Id(2, "A"), first.nextId("orders"));
      assertEquals(new Id(33, "A"), second.nextId("orders"));
    }
  }

  @Test
  void close_hands_back_the_tails_and_the_next_client_continues_after_the_last_number() throws Exception {
    ServerProcess a = start("A");
    HiloClient first = quiet().targets(a.target()).build();
    for (int i = 1; i <= 10; i++) assertEquals(i, first.nextId("orders").number());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (first.stats().rangesPrefetched() < 1 && System.nanoTime() < deadline) Thread.sleep(2);
    assertEquals(1, first.stats().rangesPrefetched());
    first.close();
    assertEquals(2, first.stats().returnsApplied());
    try (HiloClient next = quiet().targets(a.target()).build()) {
      assertEquals(new Id(11, "A"), next.nextId("orders"));
    }
  }

  @Test
  void a_bad_collection_name_is_invalid_argument() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets(a.target()).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId("bad\u0001name"));
      assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }
  }

  /**
   * A caller naming many collections the server refuses (names from its own users, say) must not grow the
   * client by one collection each; every failure still counts, and the good collection goes on.
   */
  @Test
  void collections_the_server_refuses_are_not_kept() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets(a.target()).prefetchAt(0).build()) {
      assertEquals(new Id(1, "A"), client.nextId("kept"));
      int calls = 0;
      for (int i = 0; i < 200; i++) {
        for (String bad : List.of("bad\u0001" + i, "x".repeat(257) + i)) {
          // Each way in: the client's two calls and a handle's two.
          int way = calls++ % 4;
          HiloException e = assertThrows(HiloException.class, () -> {
            if (way == 0) client.nextId(bad);
            else if (way == 1) client.nextDocumentId(bad);
            else if (way == 2) client.collection(bad).nextId();
            else client.collection(bad).nextDocumentId();
          });
          assertEquals(Status.Code.INVALID_ARGUMENT, e.code(), e.getMessage());
        }
      }
      assertEquals(Set.of("kept"), client.collectionsForTesting());
      ClientStats stats = client.stats();
      assertEquals(Map.of(Status.Code.INVALID_ARGUMENT, 400L), stats.errors());
      assertEquals(401, stats.callsWaited());  // each failed call waited for its own fetch
      assertEquals(1, stats.rangesFetched());
      assertEquals(new Id(2, "A"), client.nextId("kept"));
      assertEquals("kept/3-A", client.nextDocumentId("kept"));
    }
  }

  /**
   * Making a handle keeps nothing in the client: 1,000 handles for distinct names, half of them refused by
   * the server (called once, and failing), half valid and never called, leave nothing in the client's table,
   * and a collection in use beside them goes on as before.
   */
  @Test
  void handles_made_for_many_names_keep_nothing() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets(a.target()).prefetchAt(0).build()) {
      CollectionHandle kept = client.collection("kept");
      assertEquals(new Id(1, "A"), kept.nextId());
      List<CollectionHandle> handles = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        String name = switch (i % 4) {
          case 0 -> "bad\u0001" + i;
          case 1 -> "x".repeat(257) + i;
          default -> "never-called-" + i;
        };
        CollectionHandle h = client.collection(name);
        assertEquals(name, h.name());
        if (i % 4 < 2) {
          HiloException e = assertThrows(HiloException.class, i % 8 < 4 ? h::nextId : h::nextDocumentId);
          assertEquals(Status.Code.INVALID_ARGUMENT, e.code(), e.getMessage());
        }
        handles.add(h);
      }
      Set<String> held = client.collectionsForTesting();
      assertTrue(held.equals(Set.of("kept")), "the client holds " + held.size() + " collections, not just \"kept\"");
      assertEquals(new Id(2, "A"), kept.nextId());
      assertEquals("kept/3-A", client.nextDocumentId("kept"));
      assertEquals(Set.of("kept"), client.collectionsForTesting());
      ClientStats stats = client.stats();
      assertEquals(Map.of(Status.Code.INVALID_ARGUMENT, 500L), stats.errors());
      assertEquals(1, stats.rangesFetched());
      assertEquals(1000, handles.size());
    }
  }

  /**
   * A handle made, then called, gets exactly the numbers a fresh client would, and its collection is in the
   * client's table from its first call on (the client's own calls draw from the same range).
   */
  @Test
  void a_handle_gets_a_fresh_clients_numbers_and_keeps_its_collection_from_its_first_call() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets(a.target()).prefetchAt(0).build()) {
      CollectionHandle orders = client.collection("orders");
      CollectionHandle users = client.collection("users");
      assertEquals(Set.of(), client.collectionsForTesting());
      assertEquals(new Id(1, "A"), orders.nextId());
      assertEquals(Set.of("orders"), client.collectionsForTesting());
      assertEquals("users/1-A", users.nextDocumentId());
      assertEquals(Set.of("orders", "users"), client.collectionsForTesting());
      assertEquals("orders/2-A", orders.nextDocumentId());
      assertEquals(new Id(3, "A"), client.nextId("orders"));
      // On across the end of the first range (1-32) into the second (33-96).
      for (long n = 4; n <= 40; n++) assertEquals(new Id(n, "A"), orders.nextId());
      assertEquals("users/2-A", client.nextDocumentId("users"));
      ClientStats stats = client.stats();
      assertEquals(3, stats.rangesFetched());
      assertEquals(3, stats.callsWaited());  // each first call, and the call that found 1-32 used up
      assertEquals(Map.of(), stats.errors());
    }
  }

  /** New collections past the server's --max_collections (RESOURCE_EXHAUSTED) are not kept either. */
  @Test
  void collections_refused_for_the_limit_are_not_kept() throws Exception {
    ServerProcess l = start("L", "--max_collections=1");
    try (HiloClient client = quiet().targets(l.target()).prefetchAt(0).build()) {
      assertEquals(new Id(1, "L"), client.nextId("first"));
      for (int i = 0; i < 50; i++) {
        String name = "new" + i;
        HiloException e = assertThrows(HiloException.class, () -> client.nextId(name));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.code(), e.getMessage());
      }
      assertEquals(Set.of("first"), client.collectionsForTesting());
      assertEquals(Map.of(Status.Code.RESOURCE_EXHAUSTED, 50L), client.stats().errors());
      assertEquals(new Id(2, "L"), client.nextId("first"));
    }
  }

  /**
   * The server's own message names the collection as the caller gave it ("%s"): the client escapes that
   * whole message as it escapes names, so no line or paragraph separator or bidi override reaches a log raw.
   */
  @Test
  void a_servers_message_reaches_the_caller_escaped() throws Exception {
    ServerProcess l = start("L", "--max_collections=1");
    String name = "evil\u2028line\u202Eeno\"quote";
    try (HiloClient client = quiet().targets(l.target()).prefetchAt(0).build()) {
      client.nextId("first");
      HiloException e = assertThrows(HiloException.class, () -> client.collection(name).nextId());
      assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.code(), e.getMessage());
      assertEquals(-1, e.getMessage().indexOf('\u2028'), e.getMessage());
      assertEquals(-1, e.getMessage().indexOf('\u202E'), e.getMessage());
      assertTrue(e.getMessage().contains("evil\\u2028line\\u202Eeno\"quote"), e.getMessage());
    }
  }

  @Test
  void fails_over_when_a_node_is_killed_and_never_repeats_an_id() throws Exception {
    ServerProcess a = start("A");
    ServerProcess b = start("B");
    Set<String> ids = new HashSet<>();
    try (HiloClient client =
        quiet().targets(a.target(), b.target()).prefetchAt(0).rpcDeadline(Duration.ofSeconds(2)).build()) {
      for (int i = 0; i < 40; i++) assertTrue(ids.add(client.nextDocumentId("orders")));
      a.kill();
      for (int i = 0; i < 100; i++) assertTrue(ids.add(client.nextDocumentId("orders")));
      // A issued 1-32 and 33-96 (doubled); B's first range starts above last_max 96.
      assertTrue(ids.contains("orders/96-A"));
      assertTrue(ids.contains("orders/97-B"));
      assertTrue(ids.contains("orders/140-B"));
      assertEquals(1, client.stats().failovers());
    }
  }

  @Test
  void fails_over_when_a_node_stops_answering() throws Exception {
    ServerProcess a = start("A");
    ServerProcess b = start("B");
    try (HiloClient client =
        quiet().targets(a.target(), b.target()).prefetchAt(0).rpcDeadline(Duration.ofSeconds(2)).build()) {
      assertEquals(new Id(1, "A"), client.nextId("orders"));
      a.signal("STOP");
      for (int i = 2; i <= 32; i++) assertEquals(new Id(i, "A"), client.nextId("orders"));
      assertEquals(new Id(33, "B"), client.nextId("orders"));
      a.signal("CONT");
    }
  }

  @Test
  void all_targets_down_is_unavailable_naming_each() throws Exception {
    ServerProcess a = start("A");
    String target = a.target();
    a.kill();
    try (HiloClient client = quiet().targets(target, "dns:///127.0.0.1:1").rpcDeadline(Duration.ofSeconds(2)).build()) {
      HiloException e = assertThrows(HiloException.class, () -> client.nextId("orders"));
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertTrue(e.getMessage().contains(target) && e.getMessage().contains("dns:///127.0.0.1:1"), e.getMessage());
    }
  }

  /**
   * Messages show a collection name bounded and escaped: a name of a million characters, or holding a newline
   * or an ESC, gives a short message with nothing raw, whatever fails (the server refuses the request, no
   * target answers, the client refuses a lone surrogate) and through a handle too.
   */
  @Test
  void messages_show_a_huge_or_unprintable_name_bounded_and_escaped() throws Exception {
    ServerProcess a = start("A");
    String huge = "x".repeat(1_000_000);
    List<HiloException> errors = new ArrayList<>();
    try (HiloClient up = quiet().targets(a.target()).build();
        HiloClient down = quiet().targets("dns:///127.0.0.1:1").rpcDeadline(Duration.ofSeconds(2)).build()) {
      // Past the largest request the server takes (RESOURCE_EXHAUSTED, a message of its own).
      errors.add(assertThrows(HiloException.class, () -> up.nextId(huge)));
      HiloException unavailable = assertThrows(HiloException.class, () -> down.nextId(huge + "\n"));
      assertEquals(Status.Code.UNAVAILABLE, unavailable.code());
      assertTrue(unavailable.getMessage().contains("\"" + "x".repeat(64) + "\"... (1000001 characters)"),
          unavailable.getMessage());
      errors.add(unavailable);
      HiloException raw = assertThrows(HiloException.class, () -> down.collection("down\n\u001b[31m").nextDocumentId());
      assertTrue(raw.getMessage().contains("\"down\\n\\u001B[31m\""), raw.getMessage());
      errors.add(raw);
      HiloException surrogate = assertThrows(HiloException.class, () -> up.collection(huge + "\ud800\n").nextId());
      assertEquals(Status.Code.INVALID_ARGUMENT, surrogate.code());
      errors.add(surrogate);
    }
    for (HiloException e : errors) {
      String m = e.getMessage();
      assertTrue(m.length() < 400, e.code() + ": a message of " + m.length() + " chars");
      assertTrue(m.chars().noneMatch(ch -> ch == '\n' || ch == 0x1b || Character.isSurrogate((char) ch)), m);
    }
  }

  @Test
  void takes_a_dns_target() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets("dns:///" + a.target()).build()) {
      assertEquals("orders/1-A", client.nextDocumentId("orders"));
    }
  }

  @Test
  void eight_threads_draw_unique_well_formed_ids() throws Exception {
    ServerProcess a = start("A");
    try (HiloClient client = quiet().targets(a.target()).build()) {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<List<String>>> parts = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        parts.add(callers.submit(() -> {
          go.await();
          List<String> mine = new ArrayList<>();
          for (int i = 0; i < 3000; i++) mine.add(client.nextDocumentId("orders"));
          return mine;
        }));
      }
      go.countDown();
      Set<String> all = new HashSet<>();
      for (Future<List<String>> p : parts) {
        for (String id : p.get(60, TimeUnit.SECONDS)) {
          assertTrue(DOCUMENT_ID.matcher(id).matches(), id);
          assertTrue(all.add(id), "twice: " + id);
        }
      }
      assertEquals(24_000, all.size());
    }
  }

  @Test
  void speaks_tls_with_a_trusted_ca() throws Exception {
    Path dir = Files.createTempDirectory("hilo-java-tls");
    try {
      String script =
          "set -e\n"
              + "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n"
              + "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key"
              + " -out ca.pem -days 2 -subj '/CN=hilo java test ca' 2>/dev/null\n"
              + "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key"
              + " -out server.csr -subj '/CN=server' 2>/dev/null\n"
              + "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem"
              + " -days 2 -extfile san.ext 2>/dev/null\n";
      Process p = new ProcessBuilder("sh", "-c", script).directory(dir.toFile()).inheritIO().start();
      assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "openssl failed");
      ServerProcess a =
          start("A", "--tls_cert=" + dir.resolve("server.pem"), "--tls_key=" + dir.resolve("server.key"));
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      tls.trustManager(dir.resolve("ca.pem").toFile());
      try (HiloClient client = quiet().targets(a.target()).credentials(tls.build()).build()) {
        assertEquals("orders/1-A", client.nextDocumentId("orders"));
      }
      // Plaintext to a TLS port gets no range.
      try (HiloClient plain = quiet().targets(a.target()).rpcDeadline(Duration.ofSeconds(2)).build()) {
        assertEquals(Status.Code.UNAVAILABLE, assertThrows(HiloException.class, () -> plain.nextId("orders")).code());
      }
    } finally {
      ServerProcess.deleteTree(dir);
    }
  }
}
