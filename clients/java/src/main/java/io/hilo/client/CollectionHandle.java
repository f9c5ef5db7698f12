package io.hilo.client;

/**
 * One collection of a {@link HiloClient}, for callers that draw many IDs from it: the collection is looked
 * up once, on the handle's first call, so each call after it is the range's atomic add alone while the
 * range lasts (no lock, no map lookup; looked up again only after the client forgot the collection, one
 * that never received a range and whose call failed). Making a handle keeps nothing in the client: a
 * handle that is never called costs its client nothing. It draws from the same range as the client's own
 * calls on that collection. Safe to share between threads; it stops working (FAILED_PRECONDITION) when its
 * client is closed.
 *
 * <pre>{@code
 * CollectionHandle orders = client.collection("orders");
 * String id = orders.nextDocumentId();   // "orders/1-A"
 * }</pre>
 */
public final class CollectionHandle {
  private final CacheTable table;
  private final String name;
  /**
   * The collection's cache: {@link RangeCache#NOT_LOOKED_UP} until the first call looks the collection up,
   * and replaced when the client forgot it (a collection that never received a range, after a failed call):
   * either way the call finds no range on the fast path, gets {@link RangeCache.Forgotten} on the slow
   * one, and looks the collection up, as the client's own calls do. Volatile so that a cache another
   * thread put here is seen whole.
   */
  private volatile RangeCache cache = RangeCache.NOT_LOOKED_UP;
  private final String prefix;

  CollectionHandle(CacheTable table, String name, char separator) {
    this.table = table;
    this.name = name;
    this.prefix = name + separator;
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

  /**
   * As HiloClient's slow path, and the handle keeps the cache it looked up (on its first call, or after
   * the client forgot the one it had).
   */
  private Id slowNextId(RangeCache c) {
    while (true) {
      try {
        return c.slowNext();
      } catch (RangeCache.Forgotten f) {
        cache = c = table.lookUp(c, name);
      } catch (Throwable e) {  // even a checked exception thrown undeclared (a Kotlin interceptor's)
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
        cache = c = table.lookUp(c, name);
      } catch (Throwable e) {  // even a checked exception thrown undeclared (a Kotlin interceptor's)
        table.failed(c);
        throw e;
      }
    }
  }

  /** The collection's name. */
  public String name() {
    return name;
  }
}
