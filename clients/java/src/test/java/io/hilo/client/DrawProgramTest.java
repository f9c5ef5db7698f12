package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * examples/java/Draw.java (scripts/hilo-draw java) as scripts/hilo-draw describes every language's draw
 * program: IDs one per line on stdout and exit 0 after the drawing, drawing on through UNAVAILABLE, and
 * exit 1 with one line on stderr on any other error.
 */
class DrawProgramTest {
  private static Path dir;
  private static String cp;

  private record Run(int exit, List<String> out, List<String> err) {}

  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new IllegalStateException(name + " is not set");
    return v;
  }

  @BeforeAll
  static void compile() throws IOException {
    dir = Files.createTempDirectory("hilo-java-draw");
    cp = Path.of(env("HILO_CLIENT_JAR")).toAbsolutePath() + ":" + env("HILO_GRPC_CP");
    int rc = ToolProvider.getSystemJavaCompiler().run(null, null, null,
        "-d", dir.toString(), "-cp", cp, Path.of(env("HILO_DRAW_SRC"), "Draw.java").toString());
    assertEquals(0, rc, "javac of examples/java/Draw.java failed");
  }

  @AfterAll
  static void cleanUp() throws IOException {
    ServerProcess.deleteTree(dir);
  }

  private static Run draw(String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", dir + ":" + cp, "Draw"));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).start();
    CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> {
      try {
        return new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
      } catch (IOException e) {
        return "reading stderr failed: " + e;
      }
    });
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the draw program still runs after 60 s");
    return new Run(p.exitValue(), out.lines().toList(), err.get(10, TimeUnit.SECONDS).lines().toList());
  }

  @Test
  void prints_unique_ids_and_exits_0() throws Exception {
    try (ServerProcess server = ServerProcess.start("D")) {
      Run r = draw("--targets=" + server.target(), "--collection=orders", "--threads=3", "--seconds=0.2");
      assertEquals(0, r.exit(), "stderr: " + r.err());
      assertTrue(!r.out().isEmpty(), "no ID printed");
      Pattern form = Pattern.compile("orders/[1-9][0-9]*-D");
      Set<String> seen = new HashSet<>();
      for (String id : r.out()) {
        assertTrue(form.matcher(id).matches(), "malformed ID " + id);
        assertTrue(seen.add(id), "ID " + id + " printed twice");
      }
    }
  }

  @Test
  void draws_on_through_unavailable_and_exits_0() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();  // closed again: nothing listens there
    }
    Run r = draw("--targets=127.0.0.1:" + port, "--collection=orders", "--threads=2", "--seconds=1");
    assertEquals(0, r.exit(), "stderr: " + r.err());
    assertEquals(List.of(), r.out());
  }

  @Test
  void another_error_stops_the_draw_with_exit_1_and_one_line() throws Exception {
    try (ServerProcess server = ServerProcess.start("D")) {
      // The server refuses an empty collection name: INVALID_ARGUMENT, not a node down.
      Run r = draw("--targets=" + server.target(), "--collection=", "--threads=2", "--seconds=30");
      assertEquals(1, r.exit(), "stdout: " + r.out() + " stderr: " + r.err());
      assertEquals(List.of(), r.out());
      assertEquals(1, r.err().size(), "stderr: " + r.err());
      assertTrue(r.err().get(0).startsWith("draw: INVALID_ARGUMENT"), r.err().get(0));
    }
  }
}
