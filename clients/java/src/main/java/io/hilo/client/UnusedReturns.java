package io.hilo.client;

import io.grpc.Deadline;
import io.grpc.Status;
import io.hilo.v1.ReturnRangeRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Hands the unused ranges of many caches back at once, for {@link HiloClient#close} and {@link
 * HiloClient#returnUnusedRanges}: per target, in ReturnRanges calls of at most 1000 items and about 60 KiB,
 * a collection's two items (the range fetched ahead whole, then the current range's tail) always in the
 * same call and in that order, all calls at once. Every cache taken gets its outcomes ({@link
 * RangeCache#endReturn}) exactly once, whatever happens: a call still out after the bound counts as failed
 * (DEADLINE_EXCEEDED), and its late answer is ignored. One hand-back at a time per client (the caller's
 * lock).
 */
final class UnusedReturns {
  private static final int MAX_ITEMS = 1000;
  private static final int MAX_BYTES = 60 * 1024;

  private final RangeFetcher fetcher;
  private final Executor executor;
  private final Duration rpcDeadline;
  private final Duration bound;

  /**
   * {@code bound}: how long a hand-back waits in all, for fetches in flight and for its calls (each call
   * at least {@code rpcDeadline}); each call with its retries within {@code min(rpcDeadline, bound)}.
   * Calls run on {@code executor} (on the caller's thread once it refuses them).
   */
  UnusedReturns(RangeFetcher fetcher, Executor executor, Duration rpcDeadline, Duration bound) {
    this.fetcher = fetcher;
    this.executor = executor;
    this.rpcDeadline = rpcDeadline;
    this.bound = bound;
  }

  /** One cache's taken ranges and, once known, their outcomes. */
  private static final class Taken {
    final RangeCache cache;
    final RangeCache.Unused unused;
    final RangeFetcher.ReturnOutcome[] outcomes;

    Taken(RangeCache cache, RangeCache.Unused unused) {
      this.cache = cache;
      this.unused = unused;
      this.outcomes = new RangeFetcher.ReturnOutcome[unused.items().size()];
    }
  }

  /** One item of a call: which cache's, and which of its items. */
  private record Slot(Taken taken, int item) {}

  /** Takes each cache's unused ranges ({@code close}: closing each cache) and hands them back. */
  void handBack(Collection<RangeCache> caches, boolean close) {
    long start = System.nanoTime();
    List<Taken> all = new ArrayList<>();
    try {
      // Per target, in order: each collection's items, adjacent (the later range first).
      Map<Integer, List<Slot>> byTarget = new LinkedHashMap<>();
      for (RangeCache cache : caches) {
        long left = Math.max(0, bound.toNanos() - (System.nanoTime() - start));
        RangeCache.Unused unused = cache.takeUnused(left, close);
        if (unused.items().isEmpty()) continue;
        Taken taken = new Taken(cache, unused);
        all.add(taken);
        for (int i = 0; i < unused.items().size(); i++) {
          byTarget.computeIfAbsent(unused.items().get(i).range().target, t -> new ArrayList<>())
              .add(new Slot(taken, i));
        }
      }
      send(byTarget, start);
    } finally {
      endAll(all);
    }
  }

  /**
   * Ends the return of every cache taken, each with its outcomes (a return without one: not sent), even
   * when one of them throws (a log that throws, say): each cache's waiting callers are let go. Then throws
   * the first thing thrown.
   */
  private static void endAll(List<Taken> all) {
    RuntimeException firstRuntime = null;
    Error firstError = null;
    for (Taken taken : all) {
      List<RangeFetcher.ReturnOutcome> outcomes = new ArrayList<>(taken.outcomes.length);
      for (RangeFetcher.ReturnOutcome o : taken.outcomes) {
        outcomes.add(o != null ? o : failed(Status.Code.CANCELLED, "the return was not sent (interrupted)"));
      }
      try {
        taken.cache.endReturn(taken.unused, outcomes);
      } catch (RuntimeException e) {
        if (firstRuntime == null && firstError == null) firstRuntime = e;
      } catch (Error e) {
        if (firstRuntime == null && firstError == null) firstError = e;
      }
    }
    if (firstRuntime != null) throw firstRuntime;
    if (firstError != null) throw firstError;
  }

  private void send(Map<Integer, List<Slot>> byTarget, long start) {
    record Call(List<Slot> slots, CompletableFuture<List<RangeFetcher.ReturnOutcome>> answer) {}
    List<Call> calls = new ArrayList<>();
    Deadline deadline = Deadline.after(Math.min(rpcDeadline.toNanos(), bound.toNanos()), TimeUnit.NANOSECONDS);
    for (Map.Entry<Integer, List<Slot>> e : byTarget.entrySet()) {
      int target = e.getKey();
      for (List<Slot> part : chunks(e.getValue())) {
        List<ReturnRangeRequest> requests = new ArrayList<>(part.size());
        for (Slot s : part) {
          requests.add(s.taken().unused.items().get(s.item()).toRequest(s.taken().cache.collection()));
        }
        CompletableFuture<List<RangeFetcher.ReturnOutcome>> answer;
        try {
          answer = CompletableFuture.supplyAsync(() -> returnRanges(target, requests, deadline), executor);
        } catch (RejectedExecutionException ex) {
          answer = CompletableFuture.completedFuture(returnRanges(target, requests, deadline));
        }
        calls.add(new Call(part, answer));
      }
    }
    for (Call call : calls) {
      long left = Math.max(rpcDeadline.toNanos(), bound.toNanos() - (System.nanoTime() - start));
      List<RangeFetcher.ReturnOutcome> outcomes;
      try {
        outcomes = call.answer().get(left, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (TimeoutException e) {
        RangeFetcher.ReturnOutcome late =
            failed(Status.Code.DEADLINE_EXCEEDED,
                "the return call did not finish within its bound of " + bound.toMillis() + " ms");
        outcomes = Collections.nCopies(call.slots().size(), late);
      } catch (ExecutionException e) {
        outcomes = Collections.nCopies(call.slots().size(), thrown(e.getCause()));
      }
      for (int i = 0; i < call.slots().size(); i++) {
        Slot s = call.slots().get(i);
        s.taken().outcomes[s.item()] = outcomes.get(i);
      }
    }
  }

  /**
   * The fetcher's returnRanges, whose outcomes say how each return failed: anything it throws (a
   * ClientInterceptor's RuntimeException or Error; Targets throws nothing of its own) is every return's
   * failure, which is logged and counted, never thrown to the application (CONTRACT.md R13), the same
   * whether the call ran on the executor or, refused there, on the caller's thread.
   */
  private List<RangeFetcher.ReturnOutcome> returnRanges(
      int target, List<ReturnRangeRequest> requests, Deadline deadline) {
    try {
      return fetcher.returnRanges(target, requests, deadline);
    } catch (Throwable e) {
      return Collections.nCopies(requests.size(), thrown(e));
    }
  }

  private static RangeFetcher.ReturnOutcome thrown(Throwable t) {
    if (t instanceof HiloException h) return new RangeFetcher.ReturnOutcome(false, 0, h);
    return new RangeFetcher.ReturnOutcome(
        false, 0, new HiloException(Status.Code.UNKNOWN, "the return call failed: " + t, t));
  }

  private static RangeFetcher.ReturnOutcome failed(Status.Code code, String message) {
    return new RangeFetcher.ReturnOutcome(false, 0, new HiloException(code, message));
  }

  /**
   * Cuts one target's items into calls of at most 1000 items and about 60 KiB, never between the two
   * items of one collection (they must be judged in one call, the later range first).
   */
  private static List<List<Slot>> chunks(List<Slot> slots) {
    List<List<Slot>> out = new ArrayList<>();
    int begin = 0, bytes = 0;
    int i = 0;
    while (i < slots.size()) {
      boolean two = i + 1 < slots.size() && slots.get(i + 1).taken() == slots.get(i).taken();
      int group = two ? 2 : 1;
      // An item: the collection's bytes and about 40 bytes of numbers, tag, token and framing.
      int size = group * (slots.get(i).taken().cache.collection().length() * 3 + 40);
      if (i > begin && (i + group - begin > MAX_ITEMS || bytes + size > MAX_BYTES)) {
        out.add(slots.subList(begin, i));
        begin = i;
        bytes = 0;
      }
      bytes += size;
      i += group;
    }
    if (begin < slots.size()) out.add(slots.subList(begin, slots.size()));
    return out;
  }
}
