package io.hilo.client;

import io.grpc.Status;

/**
 * The one exception a {@link HiloClient} throws: unchecked, carrying the gRPC status code that says what
 * went wrong, and a message naming the thing and the reason.
 *
 * <ul>
 *   <li>{@code INVALID_ARGUMENT}: a bad option ({@link HiloClient.Builder#build}) or collection name (from
 *       the server).
 *   <li>{@code UNAVAILABLE}: no target answered within its deadline; the message names each. Retrying later
 *       is safe.
 *   <li>{@code INTERNAL}: a server replied with a range that breaks the contract and no other target gave a
 *       usable one.
 *   <li>{@code DEADLINE_EXCEEDED}: a caller waited longer than its bound for another caller's fetch.
 *   <li>{@code FAILED_PRECONDITION}: the client is closed.
 *   <li>{@code CANCELLED}: the calling thread was interrupted while it waited.
 *   <li>{@code UNKNOWN}: the fetch this call waited for failed with something else than a HiloException (a
 *       ClientInterceptor's RuntimeException, an Error), which is the cause; the call that fetched got it as
 *       it was thrown.
 *   <li>anything else: the server's own status ({@code RESOURCE_EXHAUSTED}, {@code OUT_OF_RANGE}, ...).
 * </ul>
 */
public final class HiloException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;

  public HiloException(Status.Code code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  public HiloException(Status.Code code, String message, Throwable cause) {
    super(code + ": " + message, cause);
    this.code = code;
  }

  /** The gRPC status code of the failure; never {@code OK}. */
  public Status.Code code() {
    return code;
  }
}
