package io.hilo.client;

import com.google.protobuf.Timestamp;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import io.hilo.v1.HiLoGrpc;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangeResponse;
import io.hilo.v1.ReturnRangeResult;
import io.hilo.v1.ReturnRangesRequest;
import io.hilo.v1.ReturnRangesResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import java.util.function.UnaryOperator;

/**
 * An in-process hilo node that keeps the server's rules as the README and hilo.proto state them: ranges
 * from max(Max, last_max) + 1, the size rule (double under 30 s, halve over 60 s, within [32, 2^20]) on an
 * injected clock, a random non-zero token per range, returns applied only with the last issued range's
 * token while Max == end and last >= the return floor, a whole return of a range issued right above the
 * previous one restoring that one's token and floor (one level), ReturnRanges judged item by item in order.
 * Knobs let a test delay, fail or corrupt replies, and see every call. On its own thread pool.
 */
final class FakeHilo extends HiLoGrpc.HiLoImplBase implements AutoCloseable {
  static final long MIN_SIZE = 32;
  static final long MAX_SIZE = 1 << 20;
  private static final AtomicInteger NAMES = new AtomicInteger();

  private static final class Row {
    long max;
    long returnFloor;
    long token;
    long lastLow;
    // The range issued before the last one: what a whole return of the last one restores.
    long prevToken;
    long prevFloor;
    long prevLow;
    long prevHigh;
  }

  final String tag;
  private final SecureRandom random = new SecureRandom();
  private final Map<String, Row> rows = new HashMap<>();
  private final ExecutorService executor = Executors.newFixedThreadPool(4);
  private final Server server;
  final ManagedChannel channel;

  /** Milliseconds since the epoch, for range_at and the size rule. */
  volatile LongSupplier clock = System::currentTimeMillis;
  /** Applied to every NextRange reply after the state changed (the node moved on whatever the reply). */
  volatile UnaryOperator<NextRangeResponse> corrupt = UnaryOperator.identity();
  /** When set, NextRange waits for it (bounded) before answering. */
  volatile CountDownLatch gate;
  /** When set, ReturnRanges waits for it (bounded) before answering. */
  volatile CountDownLatch returnGate;
  final AtomicInteger nextRangeStarted = new AtomicInteger();
  volatile boolean returnRangesUnimplemented;
  private final Queue<Status> nextRangeFailures = new ArrayDeque<>();
  private final Queue<Status> returnRangesFailures = new ArrayDeque<>();
  /** Every call in order: NextRangeRequest, ReturnRangesRequest or ReturnRangeRequest. */
  final List<Object> calls = new ArrayList<>();
  /** Every range issued: {low, high, token}. */
  final List<long[]> issued = new ArrayList<>();

  FakeHilo(String tag) throws IOException {
    this.tag = tag;
    String name = "fake-hilo-" + tag + "-" + NAMES.incrementAndGet();
    server = InProcessServerBuilder.forName(name).executor(executor).addService(this).build().start();
    channel = InProcessChannelBuilder.forName(name).build();
  }

  synchronized void failNextRange(Status status) {
    nextRangeFailures.add(status);
  }

  synchronized void failReturnRanges(Status status) {
    returnRangesFailures.add(status);
  }

  synchronized List<Object> calls() {
    return List.copyOf(calls);
  }

  synchronized long max(String collection) {
    Row row = rows.get(collection);
    return row == null ? 0 : row.max;
  }

  private static String checkCollection(String c) {
    byte[] bytes = c.getBytes(StandardCharsets.UTF_8);
    if (bytes.length < 1 || bytes.length > 256) return "collection name is " + bytes.length + " bytes";
    for (int i = 0; i < c.length(); i++) if (Character.isISOControl(c.charAt(i))) return "control character";
    return null;
  }

  @Override
  public void nextRange(NextRangeRequest request, StreamObserver<NextRangeResponse> out) {
    nextRangeStarted.incrementAndGet();
    CountDownLatch g = gate;
    if (g != null) {
      try {
        g.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    NextRangeResponse response;
    synchronized (this) {
      calls.add(request);
      Status failure = nextRangeFailures.poll();
      if (failure != null) {
        out.onError(failure.asRuntimeException());
        return;
      }
      String bad = checkCollection(request.getCollection());
      if (bad == null && (request.getLastSize() < 0 || request.getLastMax() < 0)) bad = "negative number";
      if (bad != null) {
        out.onError(Status.INVALID_ARGUMENT.withDescription(bad).asRuntimeException());
        return;
      }
      long now = clock.getAsLong();
      long size = Math.min(MAX_SIZE, Math.max(MIN_SIZE, request.getLastSize()));
      if (request.getLastSize() > 0 && request.hasLastRangeAt()) {
        long at = Math.min(now, request.getLastRangeAt().getSeconds() * 1000 + request.getLastRangeAt().getNanos() / 1_000_000);
        long age = now - at;
        if (age < 30_000) size = size * 2;
        else if (age > 60_000) size = size / 2;
        size = Math.min(MAX_SIZE, Math.max(MIN_SIZE, size));
      }
      Row row = rows.computeIfAbsent(request.getCollection(), c -> new Row());
      long low = Math.max(row.max, request.getLastMax()) + 1;
      long high = low + size - 1;
      long token;
      do {
        token = random.nextLong();
      } while (token == 0);
      row.prevToken = row.token;
      row.prevFloor = row.returnFloor;
      row.prevLow = row.lastLow;
      row.prevHigh = row.max;
      row.token = token;
      row.returnFloor = low - 1;
      row.lastLow = low;
      row.max = high;
      issued.add(new long[] {low, high, token});
      response =
          NextRangeResponse.newBuilder()
              .setLow(low)
              .setHigh(high)
              .setNodeTag(tag)
              .setRangeAt(Timestamp.newBuilder().setSeconds(now / 1000).setNanos((int) (now % 1000) * 1_000_000))
              .setRangeToken(token)
              .build();
    }
    out.onNext(corrupt.apply(response));
    out.onCompleted();
  }

  /** Judges one return as the server does; a result with code 0 when judged. Under the lock. */
  private ReturnRangeResult judge(ReturnRangeRequest r) {
    String bad = checkCollection(r.getCollection());
    if (bad == null && r.getEnd() < 1) bad = "end < 1";
    if (bad == null && (r.getLast() < 0 || r.getLast() > r.getEnd())) bad = "last not in [0, end]";
    if (bad != null) {
      return ReturnRangeResult.newBuilder().setCode(Status.Code.INVALID_ARGUMENT.value()).setMessage(bad).build();
    }
    if (r.getRangeToken() == 0) {
      return ReturnRangeResult.newBuilder()
          .setCode(Status.Code.FAILED_PRECONDITION.value())
          .setMessage("no range_token")
          .build();
    }
    Row row = rows.computeIfAbsent(r.getCollection(), c -> new Row());
    boolean applied =
        (r.getNodeTag().isEmpty() || r.getNodeTag().equals(tag))
            && row.token != 0
            && r.getRangeToken() == row.token
            && row.max == r.getEnd()
            && row.returnFloor <= r.getLast();
    if (applied) {
      boolean whole = r.getLast() == row.lastLow - 1;
      if (whole && row.prevToken != 0 && row.lastLow == row.prevHigh + 1) {
        row.token = row.prevToken;
        row.returnFloor = row.prevFloor;
        row.lastLow = row.prevLow;
      } else {
        row.token = 0;
        row.returnFloor = r.getLast();
      }
      row.prevToken = 0;
      row.max = r.getLast();
    }
    return ReturnRangeResult.newBuilder().setApplied(applied).setMax(row.max).build();
  }

  @Override
  public void returnRange(ReturnRangeRequest request, StreamObserver<ReturnRangeResponse> out) {
    ReturnRangeResult result;
    synchronized (this) {
      calls.add(request);
      result = judge(request);
    }
    if (result.getCode() != 0) {
      out.onError(Status.fromCodeValue(result.getCode()).withDescription(result.getMessage()).asRuntimeException());
      return;
    }
    out.onNext(ReturnRangeResponse.newBuilder().setApplied(result.getApplied()).setMax(result.getMax()).build());
    out.onCompleted();
  }

  @Override
  public void returnRanges(ReturnRangesRequest request, StreamObserver<ReturnRangesResponse> out) {
    if (returnRangesUnimplemented) {
      out.onError(Status.UNIMPLEMENTED.withDescription("Method not found: hilo.v1.HiLo/ReturnRanges").asRuntimeException());
      return;
    }
    CountDownLatch g = returnGate;
    if (g != null) {
      try {
        g.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    ReturnRangesResponse.Builder response = ReturnRangesResponse.newBuilder();
    synchronized (this) {
      calls.add(request);
      Status failure = returnRangesFailures.poll();
      if (failure != null) {
        out.onError(failure.asRuntimeException());
        return;
      }
      if (request.getReturnsCount() > 1000) {
        out.onError(Status.INVALID_ARGUMENT.withDescription("more than 1000 returns").asRuntimeException());
        return;
      }
      for (ReturnRangeRequest r : request.getReturnsList()) response.addResults(judge(r));
    }
    out.onNext(response.build());
    out.onCompleted();
  }

  @Override
  public void close() throws InterruptedException {
    channel.shutdownNow();
    server.shutdownNow();
    executor.shutdownNow();
    channel.awaitTermination(5, TimeUnit.SECONDS);
    server.awaitTermination(5, TimeUnit.SECONDS);
    executor.awaitTermination(5, TimeUnit.SECONDS);
  }
}
