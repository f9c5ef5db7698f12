import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.TlsChannelCredentials;
import io.hilo.client.ClientStats;
import io.hilo.client.CollectionHandle;
import io.hilo.client.HiloClient;
import io.hilo.client.HiloException;
import io.hilo.client.Id;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The Java client's conformance driver: one HiloClient, driven by JSON lines on stdin as
 * clients/conformance/PROTOCOL.md says, one JSON answer per line on stdout. Logs go to stderr.
 */
public final class Driver {
  /** Thrown for a request the driver cannot make sense of: answered with code DRIVER. */
  private static final class DriverError extends Exception {
    private static final long serialVersionUID = 1L;

    DriverError(String message) {
      super(message);
    }
  }

  private volatile HiloClient client;

  public static void main(String[] args) throws IOException, InterruptedException {
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    // Nothing but answers on stdout: anything else printed goes to stderr.
    System.setOut(System.err);
    NameResolverRegistry.getDefaultRegistry().register(new Ipv4Resolver());
    Driver driver = new Driver();
    // Requests that carry an "id" are answered from threads of their own while the next requests
    // are read (PROTOCOL.md); answers are written one line at a time.
    ExecutorService inFlight = Executors.newCachedThreadPool();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) continue;
      JsonObject request;
      try {
        request = JsonParser.parseString(line).getAsJsonObject();
      } catch (RuntimeException e) {
        write(out, error("DRIVER", "cannot parse " + line + ": " + e));
        continue;
      }
      JsonElement id = request.get("id");
      if (id != null && id.isJsonPrimitive()) {
        String requestLine = line;
        inFlight.submit(() -> {
          JsonObject answer = driver.answer(request, requestLine);
          answer.add("id", id);
          write(out, answer);
        });
        continue;
      }
      boolean exit = request.has("op") && "exit".equals(request.get("op").getAsString());
      write(out, driver.answer(request, line));
      if (exit) break;
    }
    inFlight.shutdown();
    inFlight.awaitTermination(5, TimeUnit.MINUTES);
    driver.closeClient();
    out.flush();
    System.exit(0);
  }

  /**
   * gRPC's {@code ipv4:HOST:PORT,HOST:PORT,...} target, which the suite uses for one target of several
   * addresses (target_of_several_addresses) and grpc-java 1.41 lacks: resolved, as a DNS name of several
   * addresses would be, to one address group per address, in order. The client's channel then balances
   * them with whatever policy the client chose, through gRPC's own name resolution: the scenario checks
   * that this is pick_first (one node at a time, returns to the node that issued the range).
   */
  private static final class Ipv4Resolver extends NameResolverProvider {
    @Override
    protected boolean isAvailable() {
      return true;
    }

    @Override
    protected int priority() {
      return 5;
    }

    @Override
    public String getDefaultScheme() {
      return "ipv4";
    }

    @Override
    public NameResolver newNameResolver(URI target, NameResolver.Args args) {
      if (!"ipv4".equals(target.getScheme())) return null;
      List<EquivalentAddressGroup> groups = new ArrayList<>();
      for (String hostPort : target.getSchemeSpecificPart().split(",")) {
        int colon = hostPort.lastIndexOf(':');
        if (colon < 0) throw new IllegalArgumentException("no port in \"" + hostPort + "\" of " + target);
        groups.add(new EquivalentAddressGroup(
            new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)))));
      }
      String authority = target.getSchemeSpecificPart().split(",")[0];
      return new NameResolver() {
        @Override
        public String getServiceAuthority() {
          return authority;
        }

        @Override
        public void start(Listener2 listener) {
          listener.onResult(ResolutionResult.newBuilder().setAddresses(groups).build());
        }

        @Override
        public void shutdown() {}
      };
    }
  }

  private static void write(PrintStream out, JsonObject answer) {
    synchronized (out) {
      out.println(answer);
      out.flush();
    }
  }

  private JsonObject answer(JsonObject request, String line) {
    try {
      return handle(string(request, "op"), request);
    } catch (HiloException e) {
      return error(e.code().name(), e.getMessage());
    } catch (DriverError e) {
      return error("DRIVER", e.getMessage());
    } catch (RuntimeException e) {
      return error("DRIVER", "cannot handle " + line + ": " + e);
    }
  }

  private static JsonObject error(String code, String message) {
    JsonObject o = new JsonObject();
    o.addProperty("ok", false);
    o.addProperty("code", code);
    o.addProperty("message", message);
    return o;
  }

  private static JsonObject ok() {
    JsonObject o = new JsonObject();
    o.addProperty("ok", true);
    return o;
  }

  private static String string(JsonObject request, String field) throws DriverError {
    JsonElement e = request.get(field);
    if (e == null || !e.isJsonPrimitive()) throw new DriverError("missing string field \"" + field + "\"");
    return e.getAsString();
  }

  private static long number(JsonObject request, String field, long fallback) throws DriverError {
    JsonElement e = request.get(field);
    if (e == null || e.isJsonNull()) return fallback;
    try {
      return e.getAsLong();
    } catch (RuntimeException x) {
      throw new DriverError("field \"" + field + "\" is not a number: " + e);
    }
  }

  private HiloClient client() throws DriverError {
    if (client == null) throw new DriverError("no client: send \"open\" first");
    return client;
  }

  private void closeClient() {
    if (client != null) client.close();
  }

  private JsonObject handle(String op, JsonObject request) throws DriverError {
    switch (op) {
      case "open":
        return open(request);
      case "next_id": {
        Id id = client().nextId(string(request, "collection"));
        JsonObject o = ok();
        o.addProperty("number", Long.toString(id.number()));
        o.addProperty("tag", id.nodeTag());
        return o;
      }
      case "next_document_id": {
        JsonObject o = ok();
        o.addProperty("document_id", client().nextDocumentId(string(request, "collection")));
        return o;
      }
      case "draw":
        return draw(request);
      case "fork": {
        // The JVM does not fork; ProcessBuilder starts a fresh process.
        JsonObject o = ok();
        o.addProperty("forked", false);
        return o;
      }
      case "stats":
        return stats();
      case "close": {
        JsonObject o = ok();
        if (request.has("keep_open") && request.get("keep_open").getAsBoolean()) {
          // Hands the ranges back and stays usable: the next call fetches a new range.
          client().returnUnusedRanges();
          o.addProperty("kept_open", true);
        } else if (client != null) {
          client.close();
        }
        return o;
      }
      case "exit":
        closeClient();
        client = null;
        return ok();
      default:
        throw new DriverError("unknown op \"" + op + "\"");
    }
  }

  private JsonObject open(JsonObject request) throws DriverError {
    closeClient();
    client = null;
    JsonElement targets = request.get("targets");
    if (targets == null || !targets.isJsonArray()) throw new DriverError("open needs \"targets\", a list");
    HiloClient.Builder b = HiloClient.builder();
    for (JsonElement t : targets.getAsJsonArray()) b.targets(t.getAsString());
    if (request.has("separator")) {
      String s = string(request, "separator");
      if (s.length() != 1) throw new DriverError("separator must be one character, got \"" + s + "\"");
      b.separator(s.charAt(0));
    }
    if (request.has("prefetch_at")) b.prefetchAt(request.get("prefetch_at").getAsDouble());
    b.rpcDeadline(Duration.ofMillis(number(request, "rpc_deadline_ms", 5000)));
    if (request.has("ca_file")) {
      try {
        b.credentials(TlsChannelCredentials.newBuilder().trustManager(new File(string(request, "ca_file"))).build());
      } catch (IOException e) {
        throw new DriverError("cannot read ca_file: " + e.getMessage());
      }
    }
    client = b.build();
    return ok();
  }

  private JsonObject draw(JsonObject request) throws DriverError {
    HiloClient c = client();
    CollectionHandle handle = c.collection(string(request, "collection"));
    int callers = (int) number(request, "callers", 1);
    long count = number(request, "count", -1);
    long millis = number(request, "millis", -1);
    if (callers < 1 || (count < 0) == (millis < 0)) {
      throw new DriverError("draw needs callers >= 1 and exactly one of count or millis");
    }
    boolean keepGoing = request.has("keep_going") && request.get("keep_going").getAsBoolean();
    long end = millis >= 0 ? System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis) : Long.MAX_VALUE;
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    List<Future<Map.Entry<List<String>, Map<String, Long>>>> parts = new ArrayList<>();
    try {
      for (int i = 0; i < callers; i++) {
        parts.add(pool.submit(() -> {
          List<String> ids = new ArrayList<>();
          Map<String, Long> errors = new TreeMap<>();
          for (long n = 0; count < 0 || n < count; n++) {
            if (millis >= 0 && System.nanoTime() >= end) break;
            try {
              ids.add(handle.nextDocumentId());
            } catch (HiloException e) {
              errors.merge(e.code().name(), 1L, Long::sum);
              if (!keepGoing) break;
            }
          }
          return Map.entry(ids, errors);
        }));
      }
      JsonArray ids = new JsonArray();
      Map<String, Long> errors = new TreeMap<>();
      for (Future<Map.Entry<List<String>, Map<String, Long>>> f : parts) {
        Map.Entry<List<String>, Map<String, Long>> part;
        try {
          part = f.get();
        } catch (Exception e) {
          throw new DriverError("a draw caller failed: " + e);
        }
        for (String id : part.getKey()) ids.add(id);
        part.getValue().forEach((k, v) -> errors.merge(k, v, Long::sum));
      }
      JsonObject o = ok();
      o.add("document_ids", ids);
      JsonObject e = new JsonObject();
      errors.forEach(e::addProperty);
      o.add("errors", e);
      return o;
    } finally {
      pool.shutdownNow();
    }
  }

  private JsonObject stats() throws DriverError {
    ClientStats s = client().stats();
    JsonObject stats = new JsonObject();
    stats.addProperty("calls_waited", Long.toString(s.callsWaited()));
    stats.addProperty("ranges_fetched", Long.toString(s.rangesFetched()));
    stats.addProperty("ranges_prefetched", Long.toString(s.rangesPrefetched()));
    stats.addProperty("failovers", Long.toString(s.failovers()));
    stats.addProperty("returns_applied", Long.toString(s.returnsApplied()));
    stats.addProperty("returns_refused", Long.toString(s.returnsRefused()));
    stats.addProperty("returns_failed", Long.toString(s.returnsFailed()));
    JsonObject o = ok();
    o.add("stats", stats);
    return o;
  }
}
