package io.hilo.client;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import io.hilo.v1.GetCollectionRequest;
import io.hilo.v1.HiLoAdminGrpc;
import io.hilo.v1.HiLoGrpc;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangeResponse;
import io.hilo.v1.ReturnRangesRequest;
import io.hilo.v1.ReturnRangesResponse;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;

/**
 * A real hilo_server (ServerProcess: CTest always gives one) behind an in-process gRPC layer that
 * forwards every call to it, so every rule the client meets is the server's own: the layer keeps none
 * (it used to keep a copy of the size rule, the tokens and the return rules, about 150 lines that had
 * to follow every change of the server).
 *
 * <p>Kept only for what neither the real server nor the conformance suite's proxy
 * (clients/conformance/proxy.py) can do, which HiloClientTest needs: hold a NextRange or a
 * ReturnRanges until the test lets it go (gate, returnGate), fail chosen calls with a chosen status
 * (failNextRange, failReturnRanges), answer ReturnRanges with UNIMPLEMENTED as a node older than
 * ReturnRanges does, alter a reply (corrupt), record every call, and serve in-process so a test can
 * pass the client a Channel of its own. What the real server plus the proxy can show is a conformance
 * scenario, not a test here. On its own thread pool.
 */
final class FakeHilo extends HiLoGrpc.HiLoImplBase implements AutoCloseable {
  private static final AtomicInteger NAMES = new AtomicInteger();
  private static final long FORWARD_DEADLINE_SECONDS = 10;

  final String tag;
  private final ServerProcess node;
  private final ManagedChannel nodeChannel;
  private final ExecutorService executor = Executors.newFixedThreadPool(4);
  private final Server server;
  final ManagedChannel channel;

  /** Applied to every NextRange reply (the node moved on whatever the reply). */
  volatile UnaryOperator<NextRangeResponse> corrupt = UnaryOperator.identity();
  /** When set, NextRange waits for it (at most HOLD_SECONDS) before answering. */
  volatile CountDownLatch gate;
  /** When set, ReturnRanges waits for it (at most HOLD_SECONDS) before answering. */
  volatile CountDownLatch returnGate;
  final AtomicInteger nextRangeStarted = new AtomicInteger();
  volatile boolean returnRangesUnimplemented;
  private final Queue<Status> nextRangeFailures = new ArrayDeque<>();
  private final Queue<Status> returnRangesFailures = new ArrayDeque<>();
  /** Every call in order: NextRangeRequest, ReturnRangesRequest or ReturnRangeRequest. */
  final List<Object> calls = new ArrayList<>();
  /** Every range the node issued: {low, high, token}. */
  final List<long[]> issued = new ArrayList<>();

  FakeHilo(String tag) throws Exception {
    this.tag = tag;
    node = ServerProcess.start(tag);
    nodeChannel = ManagedChannelBuilder.forTarget(node.target()).usePlaintext().build();
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

  /** The real server's stored Max of a collection (0 if it has none). */
  long max(String collection) {
    try {
      return HiLoAdminGrpc.newBlockingStub(nodeChannel)
          .withDeadlineAfter(FORWARD_DEADLINE_SECONDS, TimeUnit.SECONDS)
          .getCollection(GetCollectionRequest.newBuilder().setCollection(collection).build())
          .getCollection()
          .getMax();
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() == Status.Code.NOT_FOUND) return 0;
      throw e;
    }
  }

  private HiLoGrpc.HiLoBlockingStub forward() {
    return HiLoGrpc.newBlockingStub(nodeChannel).withDeadlineAfter(FORWARD_DEADLINE_SECONDS, TimeUnit.SECONDS);
  }

  /**
   * How long a held call waits for its gate at most, in case a test fails before letting it go: longer
   * than a test's spin until the calls it holds have arrived (10 s), shorter than their deadlines (60 s).
   */
  private static final long HOLD_SECONDS = 30;

  private static void await(CountDownLatch g) {
    if (g == null) return;
    try {
      g.await(HOLD_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void nextRange(NextRangeRequest request, StreamObserver<NextRangeResponse> out) {
    nextRangeStarted.incrementAndGet();
    await(gate);
    synchronized (this) {
      calls.add(request);
      Status failure = nextRangeFailures.poll();
      if (failure != null) {
        out.onError(failure.asRuntimeException());
        return;
      }
    }
    NextRangeResponse response;
    try {
      response = forward().nextRange(request);
    } catch (StatusRuntimeException e) {
      out.onError(e.getStatus().asRuntimeException());
      return;
    }
    synchronized (this) {
      issued.add(new long[] {response.getLow(), response.getHigh(), response.getRangeToken()});
    }
    out.onNext(corrupt.apply(response));
    out.onCompleted();
  }

  @Override
  public void returnRange(ReturnRangeRequest request, StreamObserver<ReturnRangeResponse> out) {
    synchronized (this) {
      calls.add(request);
    }
    try {
      out.onNext(forward().returnRange(request));
      out.onCompleted();
    } catch (StatusRuntimeException e) {
      out.onError(e.getStatus().asRuntimeException());
    }
  }

  @Override
  public void returnRanges(ReturnRangesRequest request, StreamObserver<ReturnRangesResponse> out) {
    if (returnRangesUnimplemented) {
      out.onError(Status.UNIMPLEMENTED.withDescription("Method not found: hilo.v1.HiLo/ReturnRanges").asRuntimeException());
      return;
    }
    await(returnGate);
    synchronized (this) {
      calls.add(request);
      Status failure = returnRangesFailures.poll();
      if (failure != null) {
        out.onError(failure.asRuntimeException());
        return;
      }
    }
    try {
      out.onNext(forward().returnRanges(request));
      out.onCompleted();
    } catch (StatusRuntimeException e) {
      out.onError(e.getStatus().asRuntimeException());
    }
  }

  @Override
  public void close() throws Exception {
    channel.shutdownNow();
    server.shutdownNow();
    executor.shutdownNow();
    nodeChannel.shutdownNow();
    channel.awaitTermination(5, TimeUnit.SECONDS);
    server.awaitTermination(5, TimeUnit.SECONDS);
    executor.awaitTermination(5, TimeUnit.SECONDS);
    nodeChannel.awaitTermination(5, TimeUnit.SECONDS);
    node.close();
  }
}
