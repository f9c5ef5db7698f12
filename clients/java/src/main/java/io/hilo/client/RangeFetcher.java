package io.hilo.client;

import io.grpc.Deadline;
import io.hilo.v1.NextRangeRequest;
import io.hilo.v1.NextRangeResponse;
import io.hilo.v1.ReturnRangeRequest;
import java.util.List;
import java.util.function.Function;

/**
 * All a {@link RangeCache} (and {@link UnusedReturns}) asks of the servers: a range, and the return of
 * ranges to the target that issued them. {@link Targets} is the real one (failover, retries, deadlines);
 * a test passes a fake that keeps a node's rules (README "The contract"). Implementations are thread-safe
 * and turn every failure into a {@link HiloException}.
 */
interface RangeFetcher {
  /** A NextRange reply and the index of the target that gave it (its returns go there). */
  record Reply(NextRangeResponse response, int target) {}

  /** The outcome of one return: a judgement (applied or not, Max after it) or the error it failed with. */
  record ReturnOutcome(boolean applied, long max, HiloException error) {}

  /**
   * The next range for {@code request}, from the first target whose reply {@code check} accepts (check
   * returns null for a usable reply, else why it is not). Throws UNAVAILABLE naming every target if none
   * answered, INTERNAL naming every target if one answered with an unusable range and none with a usable
   * one, FAILED_PRECONDITION once the client is closed, and a target's own status for any other error.
   */
  Reply nextRange(NextRangeRequest request, Function<NextRangeResponse, String> check);

  /**
   * Hands {@code items} back to {@code target}, judged in the order given (a pair of adjacent ranges of
   * one collection in one call), within {@code deadline}. One outcome per item, in order; never throws.
   */
  List<ReturnOutcome> returnRanges(int target, List<ReturnRangeRequest> items, Deadline deadline);

  /** The targets, for messages. */
  String describe();
}
