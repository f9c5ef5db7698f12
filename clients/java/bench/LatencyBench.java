import io.hilo.client.HiloClient;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Times every call of the Java client, not their mean: {@code nextId} and {@code nextDocumentId} on 1 and 2
 * threads flat out, with prefetch on, against one server (bench/client_latency.sh puts a proxy 2 ms away in
 * front of a real hilo_server), each for SECONDS on a fresh client and collection (a cold start: refills
 * included), after one warm-up of both calls so that the JIT has compiled them. Prints one RESULT line per run,
 * the columns every language's latency benchmark prints (times in nanoseconds). Not a test: it asserts nothing
 * about speed.
 *
 *   java LatencyBench HOST:PORT [SECONDS]
 */
public final class LatencyBench {
  static final int FINE_NANOS = 10_000;  // exact to the nanosecond below this; slower kept whole

  static volatile long sink;

  /** Call times of one thread; a percentile is the sample of rank floor(q * count), as in latency_histogram.h. */
  static final class Recorder {
    final long[] fine = new long[FINE_NANOS];
    long[] slow = new long[1024];
    int slowCount;
    long count, max, slow1us;

    void record(long ns) {
      if (ns < 0) ns = 0;
      if (ns < FINE_NANOS) {
        fine[(int) ns]++;
      } else {
        if (slowCount == slow.length) slow = Arrays.copyOf(slow, slowCount * 2);
        slow[slowCount++] = ns;
      }
      if (ns >= 1000) slow1us++;
      if (ns > max) max = ns;
      count++;
    }

    void merge(Recorder o) {
      for (int i = 0; i < FINE_NANOS; i++) fine[i] += o.fine[i];
      if (slowCount + o.slowCount > slow.length) slow = Arrays.copyOf(slow, slowCount + o.slowCount);
      System.arraycopy(o.slow, 0, slow, slowCount, o.slowCount);
      slowCount += o.slowCount;
      count += o.count;
      slow1us += o.slow1us;
      max = Math.max(max, o.max);
    }

    long percentile(double q) {
      if (count == 0) return 0;
      long rank = Math.min(count - 1, (long) (q * count));
      long seen = 0;
      for (int ns = 0; ns < FINE_NANOS; ns++) {
        seen += fine[ns];
        if (seen > rank) return ns;
      }
      long[] sorted = Arrays.copyOf(slow, slowCount);
      Arrays.sort(sorted);
      return sorted[(int) (rank - seen)];
    }
  }

  interface Call {
    long call(HiloClient client, String collection);
  }

  static final Call NEXT_ID = (c, name) -> c.nextId(name).number();
  static final Call NEXT_DOCUMENT_ID = (c, name) -> c.nextDocumentId(name).length();

  public static void main(String[] args) throws Exception {
    if (args.length < 1) throw new IllegalArgumentException("usage: LatencyBench HOST:PORT [SECONDS]");
    double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
    draw(args[0], "warm-up", NEXT_ID, 2, 1.0);
    draw(args[0], "warm-up", NEXT_DOCUMENT_ID, 2, 1.0);
    for (String name : new String[] {"NextId", "NextDocumentId"}) {
      for (int threads : new int[] {1, 2}) {
        draw(args[0], name, name.equals("NextId") ? NEXT_ID : NEXT_DOCUMENT_ID, threads, seconds);
      }
    }
    System.out.println("(sink " + (sink & 1) + ")");
  }

  static void draw(String target, String name, Call call, int threads, double seconds) throws Exception {
    try (HiloClient client = HiloClient.builder().targets(target).build()) {
      String collection = "latency-java-" + name + "-" + threads + "-" + System.nanoTime();
      Recorder[] recorders = new Recorder[threads];
      long begin = System.nanoTime();
      long end = begin + (long) (seconds * 1e9);
      List<Thread> workers = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        Recorder r = recorders[t] = new Recorder();
        Thread w = new Thread(() -> {
          long s = 0;
          long now = System.nanoTime();
          while (now < end) {
            long start = now;
            s += call.call(client, collection);
            now = System.nanoTime();
            r.record(now - start);
          }
          sink += s;
        });
        w.start();
        workers.add(w);
      }
      for (Thread w : workers) w.join();
      double elapsed = (System.nanoTime() - begin) / 1e9;
      Recorder total = new Recorder();
      for (Recorder r : recorders) total.merge(r);
      if (name.equals("warm-up")) return;
      System.out.printf(
          "RESULT lang=Java call=%s prefetch=on threads=%d calls=%d waited=%d p50=%d p99=%d p999=%d p9999=%d"
              + " max=%d slow_1us=%d seconds=%.3f%n",
          name, threads, total.count, client.stats().callsWaited(), total.percentile(0.5),
          total.percentile(0.99), total.percentile(0.999), total.percentile(0.9999), total.max, total.slow1us,
          elapsed);
    }
  }
}
