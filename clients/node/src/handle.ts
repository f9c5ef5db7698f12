// CollectionHandle: the public handle on one collection of a HiloClient
// (HiloClient.collection). Making one keeps nothing in the client: a handle
// on a collection the client does not keep starts on the client's
// placeholder (a cache that holds nothing and is forgotten), and its first
// call asks the client (HandleTable) for the collection's cache, made then
// if need be, which it keeps. When the client forgot that cache (a
// collection that never received a range, after a failed call), the
// handle's next call asks again the same way. Otherwise it only forwards
// to its cache. A cache knows nothing of the handles on it.

import type { RangeCache } from './range_cache.js';
import type { CallOptions, HiloId } from './types.js';

/**
 * What a handle asks of its client, for a handle whose cache `was` is
 * forgotten (or the placeholder it starts on): the collection's cache now.
 * Both drop `was` from the client's table if it is still there, and make
 * `handle` the one collection() gives for the name if the client now keeps
 * the collection and has no handle for it.
 * @internal
 */
export interface HandleTable {
  /** The cache of `handle.name`, made (and kept, unless the client is closed) if the client has none. */
  bind(handle: CollectionHandle, was: RangeCache): RangeCache;
  /** The cache of `handle.name` if the client has one; makes none. */
  find(handle: CollectionHandle, was: RangeCache): RangeCache | undefined;
}

/**
 * One collection of a HiloClient, for callers that draw many IDs from it:
 * the name is looked up once, on the handle's first call. Draws from the
 * same range as the client's nextId on that collection.
 */
export class CollectionHandle {
  private readonly collection: string;
  /** The collection's cache; the placeholder or a forgotten cache until a call replaces it with the client's cache now. */
  private cache: RangeCache;
  private readonly table: HandleTable;

  /** @internal */
  constructor(name: string, table: HandleTable, cache: RangeCache) {
    this.collection = name;
    this.table = table;
    this.cache = cache;
  }

  get name(): string {
    return this.collection;
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
   * throws, and keeps nothing in the client when it has no number.
   */
  tryNextDocumentId(): string | undefined {
    // A forgotten cache (or the placeholder) holds no range: only a miss needs the check.
    return this.cache.tryDocumentId() ?? this.found().tryDocumentId();
  }

  /** The next ID if the cached range has one, else undefined. Synchronous. */
  tryNextId(): HiloId | undefined {
    return this.cache.tryId() ?? this.found().tryId();
  }

  /** The collection's cache: the one this handle is on, unless it is forgotten (then the client's now, made if need be, kept). */
  private current(): RangeCache {
    const c = this.cache;
    return c.forgotten ? (this.cache = this.table.bind(this, c)) : c;
  }

  /** As current(), but makes no cache: when the client has none of the collection, the forgotten cache (or placeholder) this handle is on, which holds nothing. */
  private found(): RangeCache {
    const c = this.cache;
    if (!c.forgotten) return c;
    const now = this.table.find(this, c);
    return now === undefined ? c : (this.cache = now);
  }
}
