package io.hilo.client;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A real hilo_server (HILO_SERVER_BIN) on 127.0.0.1:0 with a fresh SQLite database in a temporary
 * directory; the port is read back from its start-up line. close() stops it and removes the directory.
 */
final class ServerProcess implements AutoCloseable {
  private static final Pattern SERVING = Pattern.compile("^hilo_server: serving node \\S+ on port (\\d+)");

  private final Path dir;
  private final Process process;
  private final int port;

  private ServerProcess(Path dir, Process process, int port) {
    this.dir = dir;
    this.process = process;
    this.port = port;
  }

  static String binary() {
    String bin = System.getenv("HILO_SERVER_BIN");
    if (bin == null || bin.isEmpty()) throw new IllegalStateException("HILO_SERVER_BIN is not set");
    return bin;
  }

  static ServerProcess start(String tag, String... extraFlags) throws IOException, InterruptedException {
    Path dir = Files.createTempDirectory("hilo-java-test");
    List<String> cmd = new ArrayList<>(List.of(
        binary(), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
        "--db=" + dir.resolve("hilo.db"), "--create_db", "--node_tag=" + tag));
    cmd.addAll(List.of(extraFlags));
    Path log = dir.resolve("server.log");
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      for (String line : Files.readAllLines(log)) {
        Matcher m = SERVING.matcher(line);
        if (m.find()) return new ServerProcess(dir, p, Integer.parseInt(m.group(1)));
      }
      if (!p.isAlive()) break;
      Thread.sleep(20);
    }
    String text = Files.readString(log);
    p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
    deleteTree(dir);
    throw new IllegalStateException("hilo_server did not start; its log:\n" + text);
  }

  String target() {
    return "127.0.0.1:" + port;
  }

  int port() {
    return port;
  }

  Path dir() {
    return dir;
  }

  /** kill -9. */
  void kill() throws InterruptedException {
    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
  }

  /**
   * SIGSTOP or SIGCONT. After STOP, returns only once every thread of the server is stopped: the
   * kernel stops them asynchronously, and a request sent at once could still be answered.
   */
  void signal(String name) throws IOException, InterruptedException {
    new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor(5, TimeUnit.SECONDS);
    if (!name.equals("STOP")) return;
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (!allThreadsStopped(process.pid())) {
      if (System.nanoTime() > giveUp) {
        throw new IOException("hilo_server (pid " + process.pid() + ") not stopped 5 s after SIGSTOP");
      }
      Thread.sleep(1);
    }
  }

  /** True if every thread of `pid` is stopped (state T or t in /proc/PID/task/TID/stat). */
  private static boolean allThreadsStopped(long pid) {
    Path tasks = Path.of("/proc", Long.toString(pid), "task");
    List<Path> tids;
    try (Stream<Path> s = Files.list(tasks)) {
      tids = s.toList();
    } catch (IOException e) {
      return false;
    }
    if (tids.isEmpty()) return false;
    for (Path tid : tids) {
      String stat;
      try {
        stat = Files.readString(tid.resolve("stat"), java.nio.charset.StandardCharsets.ISO_8859_1);
      } catch (IOException e) {
        continue; // the thread has exited
      }
      int paren = stat.lastIndexOf(')');
      if (paren < 0 || paren + 2 >= stat.length()) return false;
      char state = stat.charAt(paren + 2);
      if (state != 'T' && state != 't') return false;
    }
    return true;
  }

  @Override
  public void close() throws IOException, InterruptedException {
    if (process.isAlive()) {
      signal("CONT");
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
    }
    deleteTree(dir);
  }

  static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) return;
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
    }
  }
}
