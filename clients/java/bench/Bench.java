import io.hilo.client.CollectionHandle;
import io.hilo.client.HiloClient;
import io.hilo.client.Id;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Speed of the Java client's fast path against its baselines, on 1 and 2 threads (Debian 12 has no JMH, so
 * this is a plain harness, built to avoid the usual traps):
 *
 * <ul>
 *   <li>each case runs in its own fresh threads, {@value #WARMUP} warm-up rounds then {@value #ROUNDS}
 *       measured rounds of {@value #ROUND_MILLIS} ms, so the JIT has compiled the loop before it counts;
 *   <li>every result feeds a sink that is printed, so no call can be optimized away;
 *   <li>threads start together on a barrier and time is read once per batch of {@value #BATCH} calls;
 *   <li>the figure is nanoseconds per call per thread (wall time x threads / calls), median of rounds,
 *       with the spread (min-max).
 * </ul>
 *
 *   java Bench HOST:PORT     (a hilo_server to draw from; the ranges grow to 2^20, so it is asked rarely)
 */
public final class Bench {
  static final int WARMUP = 5;
  static final int ROUNDS = 10;
  static final int ROUND_MILLIS = 200;
  static final int BATCH = 1024;

  interface Op {
    long call();  // returns something derived from the result, for the sink
  }

  static volatile long sink;

  public static void main(String[] args) throws Exception {
    try (HiloClient client = HiloClient.builder().targets(args[0]).build()) {
      CollectionHandle ids = client.collection("bench");
      CollectionHandle docs = client.collection("bench_docs");
      AtomicLong counter = new AtomicLong();
      Op atomic = counter::incrementAndGet;
      Op nextId = () -> {
        Id id = ids.nextId();
        return id.number() + id.nodeTag().length();
      };
      Op uuid = () -> {
        String s = UUID.randomUUID().toString();
        return s.length() + s.charAt(35);
      };
      Op nextDocumentId = () -> {
        String s = docs.nextDocumentId();
        return s.length() + s.charAt(s.length() - 1);
      };
      System.out.printf("%-38s %8s %20s%n", "case", "ns/call", "rounds min-max");
      for (int threads : new int[] {1, 2}) {
        double a = run("AtomicLong.incrementAndGet", atomic, threads);
        double n = run("nextId (CollectionHandle)", nextId, threads);
        double u = run("UUID.randomUUID().toString()", uuid, threads);
        double d = run("nextDocumentId (CollectionHandle)", nextDocumentId, threads);
        System.out.printf("  %d thread(s): nextId / atomic = %.2fx; nextDocumentId / UUID = %.2fx%n", threads, n / a, d / u);
      }
      System.out.println("(sink " + sink + ")");
    }
  }

  static double run(String name, Op op, int threads) throws Exception {
    double[] rounds = new double[ROUNDS];
    for (int r = -WARMUP; r < ROUNDS; r++) {
      double ns = round(op, threads);
      if (r >= 0) rounds[r] = ns;
    }
    double[] sorted = rounds.clone();
    Arrays.sort(sorted);
    double median = (sorted[ROUNDS / 2 - 1] + sorted[ROUNDS / 2]) / 2;
    System.out.printf("%-38s %8.1f %9.1f-%-9.1f%n", name + " x" + threads, median, sorted[0], sorted[ROUNDS - 1]);
    return median;
  }

  /** One round: threads call op for ROUND_MILLIS; returns ns per call per thread. */
  static double round(Op op, int threads) throws Exception {
    CyclicBarrier start = new CyclicBarrier(threads + 1);
    long[] calls = new long[threads];
    long[] sinks = new long[threads];
    long[] nanos = new long[threads];
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      final int me = t;
      Thread th = new Thread(() -> {
        try {
          start.await();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
        long begin = System.nanoTime();
        long end = begin + ROUND_MILLIS * 1_000_000L;
        long n = 0, s = 0, now;
        do {
          for (int i = 0; i < BATCH; i++) s += op.call();
          n += BATCH;
          now = System.nanoTime();
        } while (now < end);
        calls[me] = n;
        sinks[me] = s;
        nanos[me] = now - begin;
      });
      th.start();
      ts.add(th);
    }
    start.await();
    for (Thread th : ts) th.join();
    double perThread = 0;
    for (int t = 0; t < threads; t++) {
      perThread += (double) nanos[t] / calls[t];
      sink += sinks[t];
    }
    return perThread / threads;
  }

}
