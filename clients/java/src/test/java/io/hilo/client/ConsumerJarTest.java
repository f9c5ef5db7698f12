package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * The built jar as a user outside this tree gets it: a program compiled against hilo-client.jar and
 * Debian's gRPC jars only (none of this tree's classes or sources), run against a real server.
 */
class ConsumerJarTest {
  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new IllegalStateException(name + " is not set");
    return v;
  }

  @Test
  void a_program_built_against_the_jar_alone_draws_ids() throws Exception {
    // A project of its own outside the tree: the source copied into a temporary directory, compiled
    // and run there with the jar and Debian's gRPC jars on the classpath, nothing else.
    Path project = Files.createTempDirectory("hilo-java-consumer");
    Path classes = Files.createDirectories(project.resolve("classes"));
    Path source = Files.copy(Path.of(env("HILO_CONSUMER_SRC"), "Consumer.java"), project.resolve("Consumer.java"));
    String cp = Path.of(env("HILO_CLIENT_JAR")).toAbsolutePath() + ":" + env("HILO_GRPC_CP");
    int rc = ToolProvider.getSystemJavaCompiler().run(null, null, null,
        "-d", classes.toString(), "-cp", cp, source.toString());
    assertEquals(0, rc, "javac of the consumer failed");
    try (ServerProcess server = ServerProcess.start("C")) {
      Process p = new ProcessBuilder(
              Path.of(System.getProperty("java.home"), "bin", "java").toString(),
              "-cp", classes + ":" + cp, "Consumer", server.target())
          .directory(project.toFile())
          .redirectError(ProcessBuilder.Redirect.INHERIT)
          .start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      assertEquals(true, p.waitFor(60, TimeUnit.SECONDS));
      assertEquals(0, p.exitValue());
      assertEquals("orders/1-C 2 C", out);
    } finally {
      ServerProcess.deleteTree(project);
    }
  }
}
