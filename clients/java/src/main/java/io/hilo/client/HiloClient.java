package io.hilo.client;

import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ConnectivityState;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * Document IDs from a hilo service, without a round trip per ID.
 *
 * <pre>{@code
 * try (HiloClient ids = HiloClient.builder().targets("hilo-0:50051", "hilo-1:50051").build()) {
 *   String id = ids.nextDocumentId("orders");   // "orders/1-A"
 *   Id raw = ids.nextId("orders");              // Id[number=2, nodeTag=A]
 * }
 * }</pre>
 *
 * <p>The client keeps one range of numbers per collection, got from a hilo server with NextRange, and
 * hands its numbers out locally; each number keeps the tag of the node that issued its range. A HiloClient
 * is safe for concurrent use by many threads. While a range lasts, a number costs one atomic add; when a
 * fifth of it is used (see {@link Builder#prefetchAt}) the next range is fetched in the background, and if
 * a range does run dry, exactly one caller asks a server while the others wait for its answer (bounded).
 * Ranges grow while a collection is busy and never go down: each request reports the previous range.
 *
 * <p>{@link #close()} hands the unused numbers back, so the next client continues right after the last
 * number this one handed out; {@link #returnUnusedRanges()} does so and keeps the client. Every failure is a {@link HiloException} carrying a gRPC status code.
 */
public final class HiloClient implements AutoCloseable {
  private final char separator;
  private final Duration rpcDeadline;
  private final Duration closeTimeout;
  private final Targets targets;
  private final List<ManagedChannel> ownedChannels;
  private final ExecutorService executor;
  private final ReconnectPacer reconnectPacer;
  private final Consumer<String> log;
  private final Object logLock = new Object();
  private final RangeCache.Setup cacheSetup;
  /** The targets as the caches see them: once closed, no fetch starts. */
  private final RangeFetcher fetcher;
  /**
   * Per collection its cache. A collection that never received a range is dropped after a call on it
   * fails ({@link #failed}), its counters kept in {@link #forgottenStats}.
   */
  private final ConcurrentHashMap<String, RangeCache> caches = new ConcurrentHashMap<>();
  /**
   * The counters of the caches dropped from {@link #caches}; guarded by itself, as is each drop, so that
   * {@link #stats} counts a dropped cache once, in here or in the table.
   */
  private final ForgottenStats forgottenStats = new ForgottenStats();
  private final UnusedReturns returns;
  /** One hand-back at a time: close waits for a returnUnusedRanges in flight. */
  private final Object returnLock = new Object();
  private final AtomicBoolean closed = new AtomicBoolean();
  private final CompletableFuture<Void> closeDone = new CompletableFuture<>();

  private HiloClient(Builder b, Targets targets, List<ManagedChannel> owned) {
    this.separator = b.separator;
    this.rpcDeadline = b.rpcDeadline;
    this.closeTimeout = b.closeTimeout != null ? b.closeTimeout : b.rpcDeadline.multipliedBy(2);
    // A fetch tries each target once, each within rpcDeadline; a waiter allows for that and a little more.
    Duration waitBound = b.rpcDeadline.multipliedBy(targets.size() + 1);
    this.targets = targets;
    this.ownedChannels = owned;
    this.reconnectPacer = new ReconnectPacer(owned, ReconnectPacer.MAX_BACKOFF);
    this.log = b.log != null ? b.log : HiloClient::logToSystemLogger;
    this.executor =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "hilo-client");
              t.setDaemon(true);
              return t;
            });
    this.cacheSetup = new RangeCache.Setup(b.prefetchAt, waitBound, executor, this::log, this::nanoTime);
    this.fetcher = new OpenTargets();
    this.returns = new UnusedReturns(fetcher, executor, rpcDeadline, closeTimeout);
  }

  /**
   * {@link Targets} once more, but a fetch after close fails with FAILED_PRECONDITION: a cache that close
   * did not see (made by a call racing close) gets no range that close would not hand back.
   */
  private final class OpenTargets implements RangeFetcher {
    @Override
    public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
      if (closed.get()) throw closedError();
      return targets.nextRange(request, check);
    }

    @Override
    public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
      return targets.returnRanges(target, items, deadline);
    }

    @Override
    public String describe() {
      return targets.describe();
    }
  }

  private static HiloException closedError() {
    return new HiloException(Status.Code.FAILED_PRECONDITION, "the hilo client is closed");
  }

  /** A builder with the defaults: separator '/', prefetchAt 0.2, rpcDeadline 5 s, plaintext. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The next number of {@code collection} and the tag of its range's node. Throws {@link HiloException}:
   * INVALID_ARGUMENT for a bad collection name (from the server); UNAVAILABLE naming every target when
   * none answered; INTERNAL naming every target when the replies broke the contract; FAILED_PRECONDITION
   * once closed; DEADLINE_EXCEEDED after waiting too long for another caller's fetch; else the server's.
   */
  public Id nextId(String collection) {
    RangeCache cache = cacheFor(collection);
    // The fast path has no exception handler: one, even never taken, made the calls measurably slower.
    Id id = cache.tryNext();
    return id != null ? id : slowNextId(cache);
  }

  /** "collection" + separator + number + "-" + tag, e.g. "orders/10-A". Errors as {@link #nextId}. */
  public String nextDocumentId(String collection) {
    RangeCache cache = cacheFor(collection);
    String prefix = collection + separator;
    String id = cache.tryNextDocumentId(prefix);
    return id != null ? id : slowNextDocumentId(cache, prefix);
  }

  /**
   * The slow path of {@link #nextId} (the range ran dry): fetches, and forgets the collection after a
   * failure (whatever was thrown) if it never received a range ({@link #failed}); a caller that finds the
   * cache forgotten (by another caller) looks the collection up again.
   */
  private Id slowNextId(RangeCache cache) {
    while (true) {
      try {
        return cache.slowNext();
      } catch (RangeCache.Forgotten f) {
        cache = lookUpAgain(cache);
      } catch (Throwable e) {  // even a checked exception thrown undeclared (a Kotlin interceptor's)
        failed(cache);
        throw e;
      }
    }
  }

  /** As {@link #slowNextId}, for {@link #nextDocumentId}. */
  private String slowNextDocumentId(RangeCache cache, String prefix) {
    while (true) {
      try {
        return cache.slowNextDocumentId(prefix);
      } catch (RangeCache.Forgotten f) {
        cache = lookUpAgain(cache);
      } catch (Throwable e) {  // even a checked exception thrown undeclared (a Kotlin interceptor's)
        failed(cache);
        throw e;
      }
    }
  }

  /**
   * A handle on {@code collection} for hot loops (see {@link CollectionHandle}). Keeps nothing in the
   * client: the handle looks the collection up on its first call, so that handles made and never called
   * (for names the server refuses, say) do not grow the client. Never fails for a bad name or a closed
   * client: the handle's first call reports it, as {@link #nextId} would (a null name is refused here,
   * INVALID_ARGUMENT).
   */
  public CollectionHandle collection(String collection) {
    if (collection == null) throw nullCollection();
    return new CollectionHandle(table, collection, separator);
  }

  /** The table as handles see it (CacheTable): this client's failed, and its look-up for a handle. */
  private final CacheTable table =
      new CacheTable() {
        @Override
        public void failed(RangeCache cache) {
          HiloClient.this.failed(cache);
        }

        @Override
        public RangeCache lookUp(RangeCache had, String collection) {
          // NOT_LOOKED_UP was never in the table: nothing to drop, and no lock taken for it.
          if (had != RangeCache.NOT_LOOKED_UP) drop(had);
          return cacheFor(collection);
        }
      };

  private RangeCache cacheFor(String collection) {
    if (collection == null) throw nullCollection();
    RangeCache cache = caches.get(collection);
    if (cache != null) return cache;
    if (closed.get()) throw closedError();
    return caches.computeIfAbsent(collection, c -> new RangeCache(c, fetcher, cacheSetup));
  }

  private static HiloException nullCollection() {
    return new HiloException(Status.Code.INVALID_ARGUMENT, "collection is null");
  }

  /**
   * After a call on {@code cache} failed: forgets the cache if it never received a range and nothing is in
   * flight for it (a name the server refuses, a new collection past the server's --max_collections), so
   * that the client keeps nothing for it; a later call on the collection starts afresh.
   */
  void failed(RangeCache cache) {
    if (cache.forgetIfUnused()) drop(cache);
  }

  /**
   * For a caller that found {@code cache} forgotten (by another caller's failure, which may not have dropped
   * it yet): drops it and returns the collection's cache now, a new one unless another caller made it.
   * Throws FAILED_PRECONDITION once the client is closed.
   */
  RangeCache lookUpAgain(RangeCache cache) {
    drop(cache);
    return cacheFor(cache.collection());
  }

  /** Removes a forgotten cache from the table and keeps its counters; once, whoever comes first. */
  private void drop(RangeCache cache) {
    synchronized (forgottenStats) {
      if (caches.remove(cache.collection(), cache)) forgottenStats.add(cache);
    }
  }

  /** Counters summed over caches: those of forgotten caches (guarded by itself), and stats()'s sum. */
  private static final class ForgottenStats {
    long waited, fetched, prefetched, applied, refused, failed;
    final long[] errors = new long[Status.Code.values().length];

    void add(RangeCache c) {
      waited += c.callsWaited.get();
      fetched += c.rangesFetched.get();
      prefetched += c.rangesPrefetched.get();
      applied += c.returnsApplied.get();
      refused += c.returnsRefused.get();
      failed += c.returnsFailed.get();
      for (int i = 0; i < errors.length; i++) errors[i] += c.errors.get(i);
    }

    void add(ForgottenStats f) {
      waited += f.waited;
      fetched += f.fetched;
      prefetched += f.prefetched;
      applied += f.applied;
      refused += f.refused;
      failed += f.failed;
      for (int i = 0; i < errors.length; i++) errors[i] += f.errors[i];
    }
  }

  /** The collections the client holds a cache of, for tests. */
  Set<String> collectionsForTesting() {
    return Set.copyOf(caches.keySet());
  }

  /** The cache of {@code collection} in the table, made if absent; for tests. */
  RangeCache cacheForTesting(String collection) {
    return cacheFor(collection);
  }

  /** The counters so far, summed over every collection, and each collection's runway. */
  public ClientStats stats() {
    Status.Code[] codes = Status.Code.values();
    ForgottenStats sum = new ForgottenStats();
    List<RangeCache> held;
    synchronized (forgottenStats) {
      // Under the lock of drop: a cache not in this list was dropped before, and is counted in here.
      held = new ArrayList<>(caches.values());
      sum.add(forgottenStats);
    }
    for (RangeCache c : held) sum.add(c);
    long waited = sum.waited, fetched = sum.fetched, prefetched = sum.prefetched;
    long applied = sum.applied, refused = sum.refused, failed = sum.failed;
    long[] errors = sum.errors;
    Map<Status.Code, Long> byCode = new EnumMap<>(Status.Code.class);
    for (int i = 0; i < codes.length; i++) if (errors[i] != 0) byCode.put(codes[i], errors[i]);
    Map<String, Duration> runway = new LinkedHashMap<>();
    long now = nanoTime();
    for (RangeCache c : held) {
      Duration d = c.runway(now);
      if (d != null) runway.put(c.collection(), d);
    }
    return new ClientStats(
        waited,
        fetched,
        prefetched,
        targets.failovers(),
        applied,
        refused,
        failed,
        Map.copyOf(byCode),
        Map.copyOf(runway));
  }

  /** The clock the runway is timed on: System.nanoTime, or a test's. */
  private volatile LongSupplier nanoClock = System::nanoTime;

  long nanoTime() {
    return nanoClock.getAsLong();
  }

  void setNanoClockForTesting(LongSupplier clock) {
    nanoClock = clock;
  }

  /**
   * Hands the unused numbers of every collection back and keeps the client: the next call on a
   * collection fetches a new range, which continues right after the last number this client handed out
   * when the return applied. As {@link #close} does with its ranges (the range fetched ahead whole, then
   * the current range's unused tail, in one ReturnRanges call per node, retried within rpcDeadline, at
   * most about closeTimeout in all), but the channels and threads stay. Calls on a collection wait while
   * its ranges go back (bounded as a wait for another caller's fetch), then fetch; no number of a range
   * handed back is ever handed out again, whether its return applied, was refused or failed. Best
   * effort: failures are logged and counted ({@link ClientStats#returnsFailed}), never thrown. For an
   * application that pauses (a batch job between runs, a service draining), so that the numbers it will
   * not use go back now rather than at close. After close it does nothing.
   */
  public void returnUnusedRanges() {
    if (closed.get()) return;
    synchronized (returnLock) {
      returns.handBack(caches.values(), false);
    }
  }

  /**
   * Hands the unused numbers back and releases what the client created (channels it made, its threads;
   * never a {@link Channel} the caller passed in). For each collection the range fetched ahead goes back
   * whole, then the current range's unused tail, both in ONE ReturnRanges call to the node that issued
   * them (to a node older than ReturnRanges, one ReturnRange each, in the same order), each with its range
   * token; retried on UNAVAILABLE or DEADLINE_EXCEEDED within rpcDeadline. Waits for the answers, at most
   * about closeTimeout. Best effort: failures are logged and counted (stats().returnsFailed()), never
   * thrown. After close every call fails with FAILED_PRECONDITION; a second close waits for the first.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      try {
        closeDone.get(closeTimeout.toNanos() + rpcDeadline.toNanos(), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (Exception e) {
        // The first close reports its own trouble.
      }
      return;
    }
    try {
      synchronized (returnLock) {
        returns.handBack(caches.values(), true);
      }
    } finally {
      executor.shutdownNow();
      reconnectPacer.close();
      for (ManagedChannel c : ownedChannels) c.shutdown();
      for (ManagedChannel c : ownedChannels) {
        try {
          if (!c.awaitTermination(1, TimeUnit.SECONDS)) c.shutdownNow();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          c.shutdownNow();
        }
      }
      closeDone.complete(null);
    }
  }

  /**
   * Hands {@code line} to the log option. A log that throws (a RuntimeException) loses that line, which
   * then goes to the System.Logger: close() and returnUnusedRanges() throw nothing, and every other
   * collection's return still ends.
   */
  private void log(String line) {
    synchronized (logLock) {
      try {
        log.accept(line);
      } catch (RuntimeException e) {
        logToSystemLogger(line + " (the log option threw " + e.getClass().getName() + ")");
      }
    }
  }

  private static void logToSystemLogger(String line) {
    System.getLogger("io.hilo.client").log(System.Logger.Level.WARNING, line);
  }

  /** Options of a {@link HiloClient}; {@link #build} checks them. Not thread-safe. */
  public static final class Builder {
    private final List<String> targets = new ArrayList<>();
    private final List<Channel> channels = new ArrayList<>();
    private char separator = '/';
    private double prefetchAt = 0.2;
    private Duration rpcDeadline = Duration.ofSeconds(5);
    private Duration closeTimeout;
    private Duration connectTimeout;
    private ChannelCredentials credentials;
    private Consumer<String> log;

    private Builder() {}

    /**
     * Server addresses in gRPC target syntax ("host:port", "dns:///name:port"), tried in this order: on
     * UNAVAILABLE or DEADLINE_EXCEEDED (or a reply that breaks the contract) the client moves to the next
     * and stays with the one that answered. The client creates a channel for each and shuts it down on
     * close.
     */
    public Builder targets(String... targets) {
      for (String t : targets) this.targets.add(Objects.requireNonNull(t, "target"));
      return this;
    }

    /** As {@link #targets(String...)}. */
    public Builder targets(List<String> targets) {
      return targets(targets.toArray(new String[0]));
    }

    /**
     * A channel the caller made (and shuts down; close never does), used as a target after those given
     * by {@link #targets}: for an in-process server, interceptors, or a channel shared with other code.
     */
    public Builder channel(Channel channel) {
      channels.add(Objects.requireNonNull(channel, "channel"));
      return this;
    }

    /** Between collection and number in a document ID. Any character but '|', '-' and the digits 0-9. */
    public Builder separator(char separator) {
      this.separator = separator;
      return this;
    }

    /** Share of a range used before the next is fetched in the background; 0 turns it off; [0, 1). */
    public Builder prefetchAt(double prefetchAt) {
      this.prefetchAt = prefetchAt;
      return this;
    }

    /** Deadline of each NextRange attempt (each target is one), and of each return with its retries. */
    public Builder rpcDeadline(Duration rpcDeadline) {
      this.rpcDeadline = Objects.requireNonNull(rpcDeadline, "rpcDeadline");
      return this;
    }

    /** How long close waits in all for fetches in flight and its returns; default twice rpcDeadline. */
    public Builder closeTimeout(Duration closeTimeout) {
      this.closeTimeout = Objects.requireNonNull(closeTimeout, "closeTimeout");
      return this;
    }

    /**
     * How long {@link #build} waits in all for the channels it creates to connect (or fail to); default
     * the larger of rpcDeadline and 3 s; zero skips the wait. A JVM's first connection loads and runs much
     * of gRPC and netty for the first time; without the wait the first NextRange pays for that inside its
     * deadline and may fail over for no reason.
     */
    public Builder connectTimeout(Duration connectTimeout) {
      this.connectTimeout = Objects.requireNonNull(connectTimeout, "connectTimeout");
      return this;
    }

    /** Credentials of every channel the client creates, e.g. TlsChannelCredentials; default plaintext. */
    public Builder credentials(ChannelCredentials credentials) {
      this.credentials = Objects.requireNonNull(credentials, "credentials");
      return this;
    }

    /**
     * Where best-effort failures (a return that failed after its retries, a prefetch) go, one line at a
     * time, never from two threads at once; default: System.Logger "io.hilo.client" at WARNING. A line
     * whose log throws a RuntimeException goes to that System.Logger instead; the client throws nothing.
     */
    public Builder log(Consumer<String> log) {
      this.log = Objects.requireNonNull(log, "log");
      return this;
    }

    /**
     * Checks the options, creates the channels and waits (at most {@link #connectTimeout} in all) until
     * each has connected or failed to, so that the first call is not charged for setting up the JVM's
     * first connection. Succeeds with no server running (a refused connection ends the wait at once). Throws {@link HiloException} with INVALID_ARGUMENT naming the bad option.
     */
    public HiloClient build() {
      if (targets.isEmpty() && channels.isEmpty()) {
        throw invalid("no targets: give at least one target or channel");
      }
      if (Character.isISOControl(separator)) {
        throw invalid(String.format(
            "separator U+%04X is a control character; a document ID holds none (a NUL would cut it short in C"
                + " strings and many stores)", (int) separator));
      }
      if (Character.isSurrogate(separator)) {
        throw invalid(String.format(
            "separator U+%04X is half a surrogate pair, not a character; it cannot be sent as UTF-8",
            (int) separator));
      }
      if (separator == '|') {
        throw invalid("separator '|' is not allowed: '|' is reserved");
      }
      if (separator == '-') {
        throw invalid("separator '-' is not allowed: '-' comes before the tag, so the number could not be"
            + " found in a document ID (CONTRACT.md R12)");
      }
      if (separator >= '0' && separator <= '9') {
        throw invalid(
            "separator '" + separator + "' is a digit; a digit would run into the number of a document ID");
      }
      if (!(prefetchAt >= 0 && prefetchAt < 1)) {
        throw invalid("prefetchAt is " + prefetchAt + "; it must be 0 (off) or in (0, 1)");
      }
      if (rpcDeadline.isNegative() || rpcDeadline.isZero()) {
        throw invalid("rpcDeadline is " + rpcDeadline + "; it must be positive");
      }
      if (connectTimeout != null && connectTimeout.isNegative()) {
        throw invalid("connectTimeout is " + connectTimeout + "; it must not be negative");
      }
      if (closeTimeout != null && closeTimeout.isNegative()) {
        throw invalid("closeTimeout is " + closeTimeout + "; it must not be negative");
      }
      ChannelCredentials creds = credentials != null ? credentials : InsecureChannelCredentials.create();
      List<String> names = new ArrayList<>();
      List<Channel> all = new ArrayList<>();
      List<ManagedChannel> owned = new ArrayList<>();
      for (String t : targets) {
        if (t.isEmpty()) throw invalid("a target is empty");
        ManagedChannel c;
        try {
          c = Grpc.newChannelBuilder(t, creds).build();
        } catch (RuntimeException e) {
          for (ManagedChannel o : owned) o.shutdownNow();
          throw new HiloException(Status.Code.INVALID_ARGUMENT, "target \"" + t + "\": " + e.getMessage(), e);
        }
        // Start connecting now, so that a failover finds the next target's connection ready.
        c.getState(true);
        owned.add(c);
        names.add(t);
        all.add(c);
      }
      for (Channel c : channels) {
        names.add(c.authority());
        all.add(c);
      }
      Duration connectWait =
          connectTimeout != null
              ? connectTimeout
              : (rpcDeadline.compareTo(Duration.ofSeconds(3)) > 0 ? rpcDeadline : Duration.ofSeconds(3));
      awaitConnections(owned, connectWait);
      return new HiloClient(this, new Targets(names, all, rpcDeadline), List.copyOf(owned));
    }

    /**
     * Waits, at most {@code bound} in all, until each channel has connected or failed to. A JVM's first
     * connection loads and runs much of gRPC and netty for the first time (well over 300 ms on a busy
     * machine); without this wait the first NextRange would spend its deadline on that and fail over.
     */
    private static void awaitConnections(List<ManagedChannel> channels, Duration bound) {
      // Loads the message classes too, which the first call would otherwise do inside its deadline.
      io.hilo.v1.NextRangeRequest.newBuilder().setCollection("warm-up").build().toByteArray();
      long deadline = System.nanoTime() + bound.toNanos();
      for (ManagedChannel c : channels) {
        while (true) {
          ConnectivityState state = c.getState(true);
          if (state == ConnectivityState.READY || state == ConnectivityState.TRANSIENT_FAILURE
              || state == ConnectivityState.SHUTDOWN) {
            break;
          }
          long left = deadline - System.nanoTime();
          if (left <= 0) return;
          CountDownLatch changed = new CountDownLatch(1);
          c.notifyWhenStateChanged(state, changed::countDown);
          try {
            if (!changed.await(left, TimeUnit.NANOSECONDS)) return;
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
          }
        }
      }
    }

    private static HiloException invalid(String message) {
      return new HiloException(Status.Code.INVALID_ARGUMENT, message);
    }
  }
}
