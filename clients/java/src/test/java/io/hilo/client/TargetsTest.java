package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.channels.ClosedChannelException;
import org.junit.jupiter.api.Test;

class TargetsTest {
  @Test
  void a_connection_closed_under_the_call_counts_as_unavailable() {
    // What grpc-java 1.41 over netty reports when the node is killed during a call.
    StatusRuntimeException closed = new StatusRuntimeException(
        Status.UNKNOWN.withDescription("channel closed").withCause(new ClosedChannelException()));
    assertEquals(Status.Code.UNAVAILABLE, Targets.statusOf(closed).getCode());
  }

  @Test
  void any_other_unknown_stays_unknown() {
    StatusRuntimeException other =
        new StatusRuntimeException(Status.UNKNOWN.withDescription("channel closed").withCause(new IllegalStateException()));
    assertEquals(Status.Code.UNKNOWN, Targets.statusOf(other).getCode());
    assertEquals(Status.Code.UNKNOWN,
        Targets.statusOf(new StatusRuntimeException(Status.UNKNOWN.withDescription("x"))).getCode());
  }
}
