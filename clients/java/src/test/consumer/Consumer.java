import io.hilo.client.HiloClient;
import io.hilo.client.HiloException;
import io.hilo.client.Id;

/**
 * A user's program, compiled against hilo-client.jar and Debian's gRPC jars alone (ConsumerJarTest): one
 * document ID and one raw Id from the target in args[0], printed, then close.
 */
public final class Consumer {
  public static void main(String[] args) {
    try (HiloClient ids = HiloClient.builder().targets(args[0]).build()) {
      String id = ids.nextDocumentId("orders");
      Id raw = ids.nextId("orders");
      System.out.println(id + " " + raw.number() + " " + raw.nodeTag());
    } catch (HiloException e) {
      System.err.println("consumer: " + e.code() + ": " + e.getMessage());
      System.exit(1);
    }
  }
}
