// CollectionHandle: the public handle on one collection of a HiloClient
// (HiloClient.collection). One per collection, made on its first
// collection() call; it only forwards to the collection's RangeCache, and
// moves to the collection's next cache when the client forgot its cache (a
// collection that never received a range, after a failed call).

import type { RangeCache } from './range_cache.js';
import type { CallOptions, HiloId } from './types.js';

/**
 * One collection of a HiloClient, for callers that draw many IDs from it:
 * the name is looked up once. Draws from the same range as the client's
 * nextId on that collection.
 */
export class CollectionHandle {
  /** The collection's cache; replaced when the client forgets it (RangeCache.follow). */
  private cache: RangeCache;

  /** @internal */
  constructor(cache: RangeCache) {
    this.cache = cache;
    cache.follow((to) => {
      this.cache = to;
    });
  }

  get name(): string {
    return this.cache.name;
  }

  /** As HiloClient.nextId on this collection. */
  nextId(options?: CallOptions): Promise<HiloId> {
    return this.cache.nextId(options);
  }

  /** As HiloClient.nextDocumentId on this collection. */
  nextDocumentId(options?: CallOptions): Promise<string> {
    return this.cache.nextDocumentId(options);
  }

  /**
   * The next document ID if the cached range has one, else undefined (then
   * await nextDocumentId, which fetches). Synchronous: never does I/O, never
   * throws.
   */
  tryNextDocumentId(): string | undefined {
    return this.cache.tryDocumentId();
  }

  /** The next ID if the cached range has one, else undefined. Synchronous. */
  tryNextId(): HiloId | undefined {
    return this.cache.tryId();
  }
}
