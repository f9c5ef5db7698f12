import io.grpc.Status;
import io.hilo.client.CollectionHandle;
import io.hilo.client.HiloClient;
import io.hilo.client.HiloException;
import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java client's draw program (scripts/hilo-draw java): THREADS threads take document IDs of COLLECTION
 * for SECONDS seconds and print each on its own line to stdout, drawing on through UNAVAILABLE (a node
 * down); then the client closes, handing its tails back, and the program exits 0. On any other error
 * during the drawing (any other status, or an exception of the client or of a thread) it stops drawing,
 * prints one line to stderr naming it and exits 1.
 *
 *   Draw --targets=HOST:PORT[,HOST:PORT...] --collection=NAME --threads=N --seconds=S
 */
public final class Draw {
  public static void main(String[] args) throws Exception {
    String targets = null, collection = null;
    int threads = 0;
    double seconds = -1;
    try {
      for (String a : args) {
        if (a.startsWith("--targets=")) targets = a.substring(10);
        else if (a.startsWith("--collection=")) collection = a.substring(13);
        else if (a.startsWith("--threads=")) threads = Integer.parseInt(a.substring(10));
        else if (a.startsWith("--seconds=")) seconds = Double.parseDouble(a.substring(10));
        else throw new IllegalArgumentException("unknown argument " + a);
      }
      if (targets == null || targets.isEmpty() || collection == null || threads < 1 || seconds < 0) {
        throw new IllegalArgumentException("need --targets, --collection, --threads >= 1 and --seconds >= 0");
      }
    } catch (IllegalArgumentException e) {
      System.err.println("draw: " + e.getMessage()
          + "; usage: Draw --targets=HOST:PORT[,...] --collection=NAME --threads=N --seconds=S");
      System.exit(2);
    }
    OutputStream out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    HiloClient client;
    try {
      client = HiloClient.builder().targets(targets.split(",")).build();
    } catch (HiloException e) {
      System.err.println("draw: " + e.getMessage());
      System.exit(1);
      return;
    }
    CollectionHandle handle = client.collection(collection);
    long end = System.nanoTime() + (long) (seconds * TimeUnit.SECONDS.toNanos(1));
    List<Thread> callers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread caller = new Thread(() -> {
        StringBuilder lines = new StringBuilder();
        try {
          while (System.nanoTime() < end && failure.get() == null) {
            try {
              lines.append(handle.nextDocumentId()).append('\n');
            } catch (HiloException e) {
              if (e.code() != Status.Code.UNAVAILABLE) {
                failure.compareAndSet(null, e);
                break;
              }
              try {
                Thread.sleep(10);  // every target down: ask again soon, without spinning
              } catch (InterruptedException ie) {
                failure.compareAndSet(null, ie);
                break;
              }
            }
            if (lines.length() >= 8192) {
              write(out, lines);
            }
          }
        } catch (RuntimeException | Error e) {
          // Not a status: a bug in the client or here. Counted like any other error, not lost with
          // the thread (an uncaught exception would end the thread and leave the exit status 0).
          failure.compareAndSet(null, e);
        } finally {
          write(out, lines);
        }
      }, "draw-" + t);
      caller.start();
      callers.add(caller);
    }
    for (Thread c : callers) c.join();
    client.close();
    synchronized (out) {
      out.flush();
    }
    Throwable e = failure.get();
    if (e != null) {
      System.err.println("draw: " + (e instanceof HiloException ? e.getMessage() : e.toString()));
      System.exit(1);
    }
    System.exit(0);
  }

  private static void write(OutputStream out, StringBuilder lines) {
    if (lines.length() == 0) return;
    byte[] bytes = lines.toString().getBytes(StandardCharsets.UTF_8);
    lines.setLength(0);
    synchronized (out) {
      try {
        out.write(bytes);
      } catch (IOException e) {
        System.err.println("draw: writing to stdout failed: " + e.getMessage());
        System.exit(1);
      }
    }
  }
}
