// CollectionHandle: the public handle on one collection of a HiloClient
// (HiloClient.collection), and how a caller's wait for a range is cut short
// by its AbortSignal.

import { HiloError, StatusCode } from './errors.js';
import type { HiloClient } from './client.js';
import type { Collection } from './range_cache.js';
import type { CallOptions, HiloId } from './types.js';

/** Takes a number of a collection in one form, if its range has one left. */
type Take<T> = (c: Collection) => T | undefined;
const takeId: Take<HiloId> = (c) => c.tryId();
const takeDocumentId: Take<string> = (c) => c.tryDocumentId();

/**
 * One collection of a HiloClient, for callers that draw many IDs from it:
 * the name is looked up once. Draws from the same range as the client's
 * nextId on that collection.
 */
export class CollectionHandle {
  private readonly client: HiloClient;
  private readonly c: Collection;

  /** @internal */
  constructor(client: HiloClient, c: Collection) {
    this.client = client;
    this.c = c;
  }

  get name(): string {
    return this.c.name;
  }

  /** As HiloClient.nextId on this collection. */
  nextId(options?: CallOptions): Promise<HiloId> {
    return this.next(takeId, options);
  }

  /** As HiloClient.nextDocumentId on this collection. */
  nextDocumentId(options?: CallOptions): Promise<string> {
    return this.next(takeDocumentId, options);
  }

  /**
   * The next document ID if the cached range has one, else undefined (then
   * await nextDocumentId, which fetches). Synchronous: never does I/O, never
   * throws.
   */
  tryNextDocumentId(): string | undefined {
    return this.c.tryDocumentId();
  }

  /** The next ID if the cached range has one, else undefined. Synchronous. */
  tryNextId(): HiloId | undefined {
    return this.c.tryId();
  }

  /** A number taken at once while the range lasts, else after waiting for a range. */
  private next<T>(take: Take<T>, options: CallOptions | undefined): Promise<T> {
    const signal = options?.signal;
    if (signal?.aborted === true) return Promise.reject(aborted(this.c.name, signal));
    const id = take(this.c);
    if (id !== undefined) return Promise.resolve(id);
    return this.waitAndTake(take, signal);
  }

  private async waitAndTake<T>(take: Take<T>, signal: AbortSignal | undefined): Promise<T> {
    let started: number | null = null;
    for (let counted = false; ; counted = true) {
      started = await this.client._wait(this.c, signal, started, counted);
      const id = take(this.c);
      if (id !== undefined) return id;
    }
  }
}

export function aborted(collection: string, signal: AbortSignal): HiloError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason);
  return new HiloError(StatusCode.CANCELLED, `wait for a number of "${collection}" aborted: ${reason}`, {
    cause: signal.reason,
  });
}

/** `p`, or a CANCELLED rejection as soon as `signal` aborts. */
export function untilAborted(p: Promise<void>, signal: AbortSignal | undefined, collection: string): Promise<void> {
  if (signal === undefined) return p;
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(aborted(collection, signal));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
