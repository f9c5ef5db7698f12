// The public shapes of hilo-client: the options of a HiloClient, an ID, the
// per-call options and the counters. Types only; index.ts exports them.

import type * as grpc from '@grpc/grpc-js';

/** Options of a HiloClient; only `targets` is required. */
export interface HiloClientOptions {
  /**
   * Server addresses in gRPC target syntax ("host:port", "dns:///name:port").
   * At least one. On UNAVAILABLE or DEADLINE_EXCEEDED, or a reply that breaks
   * the contract, the client tries the next, and stays with the one that
   * answered.
   */
  targets: readonly string[];
  /** Between collection and number in a document ID: one character, not '|', '-' or a digit. Default '/'. */
  separator?: string;
  /** Deadline of each NextRange attempt, and of each return with all its retries, in milliseconds. Default 5000. */
  rpcDeadlineMs?: number;
  /** Share of a range used before the next is fetched in the background: 0 (off) or in (0, 1). Default 0.2. */
  prefetchAt?: number;
  /** Channel credentials for every target (e.g. grpc.credentials.createSsl(ca)). Default: plaintext, or `tls`. */
  credentials?: grpc.ChannelCredentials;
  /** TLS without importing @grpc/grpc-js: PEM root certificates (and a client certificate for mTLS). */
  tls?: {
    ca?: Buffer | string;
    cert?: Buffer | string;
    key?: Buffer | string;
    /** The name to check the server's certificate against, when it differs from the target's host. */
    serverName?: string;
  };
  /** Extra channel options for every target (grpc-js `ChannelOptions`). */
  channelOptions?: grpc.ChannelOptions;
  /** Where best-effort failures (a return that failed after its retries) go; default: one line on stderr. */
  log?: (line: string) => void;
  /** A monotonic clock in milliseconds (default performance.now), for tests that move time by hand. */
  clock?: () => number;
}

/** One number and the tag of the node whose range it came from. */
export interface HiloId {
  /** Exact: a JavaScript number stops being exact above 2^53 - 1, and IDs reach 2^63 - 1. */
  readonly number: bigint;
  /** 1-4 characters of A-Z and 0-9. */
  readonly tag: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Stops this caller's wait for a range (rejects with CANCELLED); the fetch itself goes on for the others. */
  signal?: AbortSignal;
}

/**
 * Counters since the client was created; each only grows. They move only
 * where a range is fetched or returned, never on the fast path. The names
 * are those of clients/conformance/PROTOCOL.md.
 */
export interface HiloStats {
  /** ID requests that waited for a range from a server (or for that fetch's error). */
  calls_waited: number;
  /** Ranges a server issued to this client and the client accepted, prefetched or not. */
  ranges_fetched: number;
  /** Of those, ranges fetched ahead of need. */
  ranges_prefetched: number;
  /** Fetches answered by another target because the preferred one failed. */
  failovers: number;
  /** Ranges handed back: applied by the node, refused (normal: it issued a newer range), or failed after retries. */
  returns_applied: number;
  returns_refused: number;
  returns_failed: number;
  /** Failed fetches and returns, by status code name. */
  errors: Record<string, number>;
  /**
   * Not a counter: per collection, how many milliseconds the numbers the
   * client holds (the rest of its current range and a range fetched ahead)
   * last at the rate it handed them out since its previous range began
   * (clients/CONTRACT.md R14). The server sizes ranges so that a
   * collection in steady use still holds its --range_runway (30 s) when it
   * asks for the next one. Collections holding no numbers, or that handed
   * none out yet, are absent.
   */
  runway_ms: Record<string, number>;
}
