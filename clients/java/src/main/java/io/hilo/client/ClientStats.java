package io.hilo.client;

import io.grpc.Status;
import java.time.Duration;
import java.util.Map;

/**
 * Counters of a client's behaviour since it was built, for an application's own dashboard. Each only grows,
 * like a Prometheus counter. They move only where a range is fetched or returned, never on the fast path.
 *
 * @param callsWaited ID requests that waited for a range from a server (or for that fetch's error)
 * @param rangesFetched ranges a server issued to this client, prefetched or not
 * @param rangesPrefetched of those, ranges fetched ahead of need
 * @param failovers fetches answered by another target because the preferred one failed
 * @param returnsApplied ranges handed back that the node took back
 * @param returnsRefused ranges handed back that the node refused (normal: it issued a newer one meanwhile)
 * @param returnsFailed ranges whose return got no answer after its retries, or an error
 * @param errors failed fetches and returns by the code the client got after failover and retries
 * @param runway not a counter: per collection, how long the numbers the client holds (the rest of its current
 *     range and a range fetched ahead) last at the rate it handed them out since its previous range began
 *     (CONTRACT.md R14). The server sizes ranges so that a collection in steady use still holds its
 *     --range_runway (30 s) when it asks for the next one. Collections holding no numbers, or that handed none
 *     out yet, are absent.
 */
public record ClientStats(
    long callsWaited,
    long rangesFetched,
    long rangesPrefetched,
    long failovers,
    long returnsApplied,
    long returnsRefused,
    long returnsFailed,
    Map<Status.Code, Long> errors,
    Map<String, Duration> runway) {}
