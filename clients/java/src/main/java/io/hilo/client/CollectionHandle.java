package io.hilo.client;

/**
 * One collection of a {@link HiloClient}, for callers that draw many IDs from it: the collection is looked
 * up once, when the handle is made, so each call is the range's atomic add alone while the range lasts
 * (no lock, no map lookup; looked up again only after the client forgot the collection, one that never
 * received a range and whose call failed). It draws from the same range as the client's own calls on that collection.
 * Safe to share between threads; it stops working (FAILED_PRECONDITION) when its client is closed.
 *
 * <pre>{@code
 * CollectionHandle orders = client.collection("orders");
 * String id = orders.nextDocumentId();   // "orders/1-A"
 * }</pre>
 */
public final class CollectionHandle {
  private final CacheTable table;
  /**
   * The collection's cache. Replaced only when the client forgot it (a collection that never received a
   * range, after a failed call): the handle then looks the collection up again, as the client's own calls
   * do. Volatile so that a cache another thread put here is seen whole.
   */
  private volatile RangeCache cache;
  private final String prefix;

  CollectionHandle(CacheTable table, RangeCache cache, char separator) {
    this.table = table;
    this.cache = cache;
    this.prefix = cache.collection() + separator;
  }

  /** As {@link HiloClient#nextId} on this collection. */
  public Id nextId() {
    RangeCache c = cache;
    // No exception handler on the fast path (see HiloClient#nextId).
    Id id = c.tryNext();
    return id != null ? id : slowNextId(c);
  }

  /** As {@link HiloClient#nextDocumentId} on this collection. */
  public String nextDocumentId() {
    RangeCache c = cache;
    String id = c.tryNextDocumentId(prefix);
    return id != null ? id : slowNextDocumentId(c);
  }

  /** As HiloClient's slow path, and the handle takes the cache it looked up. */
  private Id slowNextId(RangeCache c) {
    while (true) {
      try {
        return c.slowNext();
      } catch (RangeCache.Forgotten f) {
        cache = c = table.lookUpAgain(c);
      } catch (HiloException e) {
        table.failed(c);
        throw e;
      }
    }
  }

  private String slowNextDocumentId(RangeCache c) {
    while (true) {
      try {
        return c.slowNextDocumentId(prefix);
      } catch (RangeCache.Forgotten f) {
        cache = c = table.lookUpAgain(c);
      } catch (HiloException e) {
        table.failed(c);
        throw e;
      }
    }
  }

  /** The collection's name. */
  public String name() {
    return cache.collection();
  }
}
