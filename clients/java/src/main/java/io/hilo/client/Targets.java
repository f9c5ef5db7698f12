package io.hilo.client;

import io.grpc.Channel;
import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.hilo.v1.HiLoGrpc;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangeResponse;
import io.hilo.v1.ReturnRangeResult;
import io.hilo.v1.ReturnRangesRequest;
import io.hilo.v1.ReturnRangesResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * The servers a client talks to, and the only place where a gRPC status becomes a {@link HiloException}.
 * NextRange goes to the preferred target first and on to the next after UNAVAILABLE, DEADLINE_EXCEEDED or
 * a reply that breaks the contract; the target that answered becomes the preferred one. Returns go to the
 * target that issued the range, retried on UNAVAILABLE or DEADLINE_EXCEEDED within one deadline. Every RPC
 * carries a deadline (gRPC measures it on the monotonic clock). Thread-safe.
 */
final class Targets implements RangeFetcher {
  /** Attempts of one return call (ReturnRanges, or a ReturnRange of the fallback). */
  static final int RETURN_ATTEMPTS = 3;

  private static final long RETURN_BACKOFF_MILLIS = 50;

  private final List<String> names;
  private final List<HiLoGrpc.HiLoBlockingStub> stubs;
  private final Duration rpcDeadline;
  private final AtomicInteger preferred = new AtomicInteger();
  private final AtomicLong failovers = new AtomicLong();
  /** Per target: it answered ReturnRanges with UNIMPLEMENTED (a server older than the RPC). */
  private final AtomicBoolean[] noBatches;

  Targets(List<String> names, List<Channel> channels, Duration rpcDeadline) {
    this.names = List.copyOf(names);
    this.rpcDeadline = rpcDeadline;
    List<HiLoGrpc.HiLoBlockingStub> s = new ArrayList<>();
    for (Channel c : channels) s.add(HiLoGrpc.newBlockingStub(c));
    this.stubs = List.copyOf(s);
    this.noBatches = new AtomicBoolean[names.size()];
    for (int i = 0; i < noBatches.length; i++) noBatches[i] = new AtomicBoolean();
  }

  int size() {
    return names.size();
  }

  String name(int target) {
    return names.get(target);
  }

  long failovers() {
    return failovers.get();
  }

  @Override
  public String describe() {
    return String.join(", ", names);
  }

  static boolean isTransient(Status.Code code) {
    return code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED;
  }

  /**
   * The status of a failed call, as this client judges it. grpc-java 1.41 over netty reports a connection
   * that closed under a call (a node killed mid-call) as UNKNOWN "channel closed", from netty's
   * ClosedChannelException; that is the node going away, so it counts as UNAVAILABLE. (Safe to fail over
   * or retry either way: a NextRange that did arrive only leaves a range unused, and a return applies at
   * most once.)
   */
  static Status statusOf(StatusRuntimeException e) {
    Status status = e.getStatus();
    if (status.getCode() == Status.Code.UNKNOWN) {
      for (Throwable t = status.getCause(); t != null; t = t.getCause()) {
        if (t instanceof java.nio.channels.ClosedChannelException) {
          return Status.UNAVAILABLE.withDescription(
              "the connection closed during the call (" + status.getDescription() + ")").withCause(t);
        }
      }
    }
    return status;
  }

  /**
   * Asks the targets in turn, from the preferred one, for the next range. {@code check} returns null for a
   * usable reply, else why it is not: such a target is skipped like one that is down. Throws UNAVAILABLE
   * naming every target if none answered, INTERNAL naming every target if one answered with an unusable
   * range and none with a usable one, and a target's own status for any other error.
   */
  @Override
  public Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check) {
    String name = request.getCollection();
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < name.length() && Character.isLowSurrogate(name.charAt(i + 1))) {
        i++;
        continue;
      }
      if (Character.isSurrogate(c)) {
        // Protobuf would send '?' in its place, and two names would become one collection.
        throw new HiloException(
            Status.Code.INVALID_ARGUMENT,
            "collection name " + Names.quote(name) + " holds an unpaired surrogate (UTF-16 index " + i
                + "), which is no Unicode character; a collection is 1-256 bytes of UTF-8 without control"
                + " characters");
      }
    }
    List<String> failures = new ArrayList<>();
    boolean anyInvalid = false;
    int first = preferred.get();
    int n = stubs.size();
    for (int i = 0; i < n; i++) {
      int index = (first + i) % n;
      NextRangeResponse response;
      try {
        try {
          response =
              stubs.get(index).withDeadlineAfter(rpcDeadline.toNanos(), TimeUnit.NANOSECONDS).nextRange(request);
        } catch (StatusRuntimeException e) {
          if (!echoRefused(statusOf(e).getCode(), request)) throw e;
          // A node far behind the one that issued the range reported (CONTRACT.md R17): asked again without
          // it. Its IDs carry its own tag, and a range at or below what this client has from that very node
          // is still refused by check: none repeats.
          NextRangeRequest bare = NextRangeRequest.newBuilder().setCollection(request.getCollection()).build();
          response =
              stubs.get(index).withDeadlineAfter(rpcDeadline.toNanos(), TimeUnit.NANOSECONDS).nextRange(bare);
        }
      } catch (StatusRuntimeException e) {
        Status status = statusOf(e);
        if (!isTransient(status.getCode())) {
          throw new HiloException(status.getCode(), names.get(index) + ": " + describe(status), e);
        }
        failures.add(names.get(index) + ": " + status.getCode() + ": " + describe(status));
        continue;
      }
      String problem = check.apply(response);
      if (problem != null) {
        anyInvalid = true;
        failures.add(names.get(index) + ": " + problem);
        continue;
      }
      if (i > 0) {
        preferred.set(index);
        failovers.incrementAndGet();
      }
      return new Reply(response, index);
    }
    if (anyInvalid) {
      throw new HiloException(
          Status.Code.INTERNAL,
          "no hilo server gave a usable range of " + Names.quote(request.getCollection()) + ": "
              + String.join("; ", failures));
    }
    throw new HiloException(
        Status.Code.UNAVAILABLE,
        "no hilo server answered NextRange for " + Names.quote(request.getCollection()) + ": "
            + String.join("; ", failures));
  }

  /**
   * Whether {@code code} may be a node's refusal of the previous range {@code request} reports: the last_max
   * guard rail (FAILED_PRECONDITION) or a field it finds malformed (INVALID_ARGUMENT).
   */
  static boolean echoRefused(Status.Code code, NextRangeRequest request) {
    boolean echoes = request.getLastMax() != 0 || request.getLastSize() != 0 || request.hasLastRangeAt();
    return echoes && (code == Status.Code.FAILED_PRECONDITION || code == Status.Code.INVALID_ARGUMENT);
  }

  /**
   * Sends {@code items} to {@code target} in one ReturnRanges call, judged in the order given; on
   * UNIMPLEMENTED (a server older than ReturnRanges) one ReturnRange per item, in the same order. Each call
   * is retried on UNAVAILABLE or DEADLINE_EXCEEDED (up to {@link #RETURN_ATTEMPTS} attempts) while {@code
   * deadline} lasts. One outcome per item, in order; never throws.
   */
  @Override
  public List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline) {
    List<ReturnOutcome> outcomes = new ArrayList<>();
    if (!noBatches[target].get()) {
      ReturnRangesRequest request = ReturnRangesRequest.newBuilder().addAllReturns(items).build();
      try {
        ReturnRangesResponse response =
            withRetries(deadline, stub -> stub.returnRanges(request), target);
        if (response.getResultsCount() != items.size()) {
          HiloException e =
              new HiloException(
                  Status.Code.INTERNAL,
                  names.get(target) + ": ReturnRanges answered " + response.getResultsCount()
                      + " results for " + items.size() + " returns");
          for (int i = 0; i < items.size(); i++) outcomes.add(new ReturnOutcome(false, 0, e));
          return outcomes;
        }
        for (ReturnRangeResult r : response.getResultsList()) {
          if (r.getCode() != 0) {
            Status.Code code = Status.fromCodeValue(r.getCode()).getCode();
            outcomes.add(
                new ReturnOutcome(false, 0, new HiloException(code, names.get(target) + ": " + r.getMessage())));
          } else {
            outcomes.add(new ReturnOutcome(r.getApplied(), r.getMax(), null));
          }
        }
        return outcomes;
      } catch (HiloException e) {
        if (e.code() != Status.Code.UNIMPLEMENTED) {
          for (int i = 0; i < items.size(); i++) outcomes.add(new ReturnOutcome(false, 0, e));
          return outcomes;
        }
        noBatches[target].set(true);
      }
    }
    for (ReturnRangeRequest item : items) {
      try {
        ReturnRangeResponse r = withRetries(deadline, stub -> stub.returnRange(item), target);
        outcomes.add(new ReturnOutcome(r.getApplied(), r.getMax(), null));
      } catch (HiloException e) {
        outcomes.add(new ReturnOutcome(false, 0, e));
      }
    }
    return outcomes;
  }

  private <T> T withRetries(
      Deadline deadline, Function<HiLoGrpc.HiLoBlockingStub, T> call, int target) {
    StatusRuntimeException last = null;
    for (int attempt = 1; attempt <= RETURN_ATTEMPTS; attempt++) {
      if (deadline.isExpired()) break;
      try {
        return call.apply(stubs.get(target).withDeadline(deadline));
      } catch (StatusRuntimeException e) {
        last = e;
        if (!isTransient(statusOf(e).getCode())) break;
        long pause = Math.min(RETURN_BACKOFF_MILLIS * attempt, deadline.timeRemaining(TimeUnit.MILLISECONDS));
        if (attempt == RETURN_ATTEMPTS || pause <= 0) break;
        try {
          Thread.sleep(pause);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    if (last == null) {
      return throwDeadline(target);
    }
    Status status = statusOf(last);
    throw new HiloException(status.getCode(), names.get(target) + ": " + describe(status), last);
  }

  private <T> T throwDeadline(int target) {
    throw new HiloException(
        Status.Code.DEADLINE_EXCEEDED, names.get(target) + ": the return's deadline passed before it was sent");
  }

  private static String describe(Status status) {
    String d = status.getDescription();
    // The server's text may hold the collection name as the caller gave it: escaped and bounded as names are.
    return d == null || d.isEmpty() ? "(no message)" : Names.text(d);
  }
}
