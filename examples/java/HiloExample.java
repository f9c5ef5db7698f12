// Calls a hilo server through the generated Java stubs.
//
//   CP=$(examples/java/classpath.sh)
//   javac -d build/java-example -cp "$CP" build/gen/java/io/hilo/v1/*.java \
//       examples/java/HiloExample.java
//   java -cp "build/java-example:$CP" HiloExample 127.0.0.1:50051 [COLLECTION]
//
// Uses a new collection (a unique name unless one is given), so the ranges
// are exact: 1-32, then 33-64 for a second client, 65-128 for a client that
// reports its previous range, and after handing back all of that range but
// its first number, 66-97. Each range carries a range_token (never 0); the
// return sends it and is applied, the same return sent again is refused (a
// node applies a return at most once), and a return without a token fails
// with FAILED_PRECONDITION. A bad collection name must fail with
// INVALID_ARGUMENT. Exits 1 on any difference.

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.hilo.v1.HiLoGrpc;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import io.hilo.v1.ReturnRangeResponse;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

public final class HiloExample {
  private HiloExample() {}

  private static void check(String what, Object got, Object want) {
    if (!Objects.equals(got, want)) {
      System.out.println("FAIL " + what + ": got " + got + ", want " + want);
      System.exit(1);
    }
    System.out.println("ok   " + what + ": " + got);
  }

  private static List<Long> bounds(NextRangeResponse r) {
    return List.of(r.getLow(), r.getHigh());
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: HiloExample HOST:PORT [COLLECTION]");
      System.exit(2);
    }
    String collection =
        args.length > 1
            ? args[1]
            : "example-java-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
    ManagedChannel channel = ManagedChannelBuilder.forTarget(args[0]).usePlaintext().build();
    try {
      HiLoGrpc.HiLoBlockingStub stub = HiLoGrpc.newBlockingStub(channel);

      NextRangeResponse first =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS)
              .nextRange(NextRangeRequest.newBuilder().setCollection(collection).build());
      check("first range", bounds(first), List.of(1L, 32L));
      check("node tag", first.getNodeTag(), "A");
      check("range_at set", first.hasRangeAt(), true);

      NextRangeResponse second =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS)
              .nextRange(NextRangeRequest.newBuilder().setCollection(collection).build());
      check("second range starts after the first", second.getLow(), first.getHigh() + 1);
      check("second range", bounds(second), List.of(33L, 64L));

      NextRangeResponse third =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS)
              .nextRange(
                  NextRangeRequest.newBuilder()
                      .setCollection(collection)
                      .setLastSize(second.getHigh() - second.getLow() + 1)
                      .setLastRangeAt(second.getRangeAt())
                      .setLastMax(second.getHigh())
                      .build());
      check("third range (size doubled)", bounds(third), List.of(65L, 128L));

      // fixed64: Java holds it in a long, so half of all tokens are negative.
      check("range_token set", third.getRangeToken() != 0, true);

      // Used only 65: hand back 66-128, with the range's token.
      ReturnRangeRequest withoutToken =
          ReturnRangeRequest.newBuilder()
              .setCollection(collection)
              .setEnd(third.getHigh())
              .setLast(third.getLow())
              .setNodeTag(third.getNodeTag())
              .build();
      ReturnRangeRequest tail =
          withoutToken.toBuilder().setRangeToken(third.getRangeToken()).build();
      ReturnRangeResponse returned =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS).returnRange(tail);
      check("return of the unused tail applied", returned.getApplied(), true);
      check("max after the return", returned.getMax(), 65L);
      // The token is spent: a retried or duplicated return changes nothing.
      ReturnRangeResponse again =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS).returnRange(tail);
      check(
          "the same return again is refused",
          List.of(again.getApplied(), again.getMax()),
          List.of(false, 65L));
      Status.Code noToken = Status.Code.OK;
      try {
        stub.withDeadlineAfter(10, TimeUnit.SECONDS).returnRange(withoutToken);
      } catch (StatusRuntimeException e) {
        noToken = e.getStatus().getCode();
      }
      check("return without a range_token", noToken, Status.Code.FAILED_PRECONDITION);
      NextRangeResponse fourth =
          stub.withDeadlineAfter(10, TimeUnit.SECONDS)
              .nextRange(NextRangeRequest.newBuilder().setCollection(collection).build());
      check("next range continues after the return", bounds(fourth), List.of(66L, 97L));

      for (String bad : List.of("", "bad\ncollection", "x".repeat(257))) {
        Status.Code code = Status.Code.OK;
        try {
          stub.withDeadlineAfter(10, TimeUnit.SECONDS)
              .nextRange(NextRangeRequest.newBuilder().setCollection(bad).build());
        } catch (StatusRuntimeException e) {
          code = e.getStatus().getCode();
        }
        String shown = bad.length() > 12 ? bad.substring(0, 12) : bad;
        check("bad collection \"" + shown.replace("\n", "\\n") + "\"", code,
            Status.Code.INVALID_ARGUMENT);
      }
      System.out.println("java example: all checks passed");
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
