// CollectionHandle: the public handle on one collection of a HiloClient
// (HiloClient.collection). Made on a collection's first collection() call;
// it only forwards to the collection's RangeCache. When the client forgot
// that cache (a collection that never received a range, after a failed
// call), the handle's next call looks the name up again through the
// forgotten cache (RangeCache.successor, the client's lookup) and keeps the
// cache it finds. A cache knows nothing of the handles on it.

import type { RangeCache } from './range_cache.js';
import type { CallOptions, HiloId } from './types.js';

/**
 * One collection of a HiloClient, for callers that draw many IDs from it:
 * the name is looked up once. Draws from the same range as the client's
 * nextId on that collection.
 */
export class CollectionHandle {
  /** The collection's cache; replaced by the collection's cache now once the client forgot it. */
  private cache: RangeCache;

  /** @internal */
  constructor(cache: RangeCache) {
    this.cache = cache;
  }

  get name(): string {
    return this.cache.name;
  }

  /** As HiloClient.nextId on this collection. */
  nextId(options?: CallOptions): Promise<HiloId> {
    return this.current().nextId(options);
  }

  /** As HiloClient.nextDocumentId on this collection. */
  nextDocumentId(options?: CallOptions): Promise<string> {
    return this.current().nextDocumentId(options);
  }

  /**
   * The next document ID if the cached range has one, else undefined (then
   * await nextDocumentId, which fetches). Synchronous: never does I/O, never
   * throws.
   */
  tryNextDocumentId(): string | undefined {
    // A forgotten cache holds no range: only a miss needs the check.
    return this.cache.tryDocumentId() ?? this.current().tryDocumentId();
  }

  /** The next ID if the cached range has one, else undefined. Synchronous. */
  tryNextId(): HiloId | undefined {
    return this.cache.tryId() ?? this.current().tryId();
  }

  /** The collection's cache: the one this handle is on, unless the client forgot it (then the one the client has now, kept). */
  private current(): RangeCache {
    const c = this.cache;
    return c.forgotten ? (this.cache = c.successor()) : c;
  }
}
