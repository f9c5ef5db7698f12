package io.hilo.client;

import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Caps the reconnect back-off of the channels a client made at {@link #MAX_BACKOFF} (CONTRACT.md R18). An ID
 * service sits under every insert, so a client must come back within about a second of a server's return;
 * grpc-java's own back-off grows to 2 minutes, and version 1.41 has no channel option to bound it. So a
 * channel that enters TRANSIENT_FAILURE has its back-off reset {@link #MAX_BACKOFF} later, which starts a
 * new connection attempt at once, and again while it stays there. Thread-safe; {@link #close} stops it.
 */
final class ReconnectPacer implements AutoCloseable {
  static final Duration MAX_BACKOFF = Duration.ofSeconds(1);

  private final Duration pace;
  private final ScheduledExecutorService timer;
  private volatile boolean closed;

  ReconnectPacer(List<ManagedChannel> channels, Duration pace) {
    this.pace = pace;
    this.timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "hilo-reconnect");
              t.setDaemon(true);
              return t;
            });
    for (ManagedChannel c : channels) watch(c);
  }

  private void watch(ManagedChannel channel) {
    if (closed) return;
    ConnectivityState state = channel.getState(false);
    if (state == ConnectivityState.SHUTDOWN) return;
    if (state != ConnectivityState.TRANSIENT_FAILURE) {
      channel.notifyWhenStateChanged(state, () -> watch(channel));
      return;
    }
    try {
      timer.schedule(
          () -> {
            if (closed) return;
            channel.resetConnectBackoff();
            watch(channel);
          },
          pace.toNanos(),
          TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      // Closed meanwhile.
    }
  }

  @Override
  public void close() {
    closed = true;
    timer.shutdownNow();
  }
}
