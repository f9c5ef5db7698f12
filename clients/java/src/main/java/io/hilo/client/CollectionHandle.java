package io.hilo.client;

/**
 * One collection of a {@link HiloClient}, for callers that draw many IDs from it: the collection is looked
 * up once, when the handle is made, so each call is the range's atomic add alone while the range lasts
 * (no lock, no map lookup). It draws from the same range as the client's own calls on that collection.
 * Safe to share between threads; it stops working (FAILED_PRECONDITION) when its client is closed.
 *
 * <pre>{@code
 * CollectionHandle orders = client.collection("orders");
 * String id = orders.nextDocumentId();   // "orders/1-A"
 * }</pre>
 */
public final class CollectionHandle {
  private final RangeCache cache;
  private final String prefix;

  CollectionHandle(RangeCache cache, char separator) {
    this.cache = cache;
    this.prefix = cache.collection() + separator;
  }

  /** As {@link HiloClient#nextId} on this collection. */
  public Id nextId() {
    return cache.next();
  }

  /** As {@link HiloClient#nextDocumentId} on this collection. */
  public String nextDocumentId() {
    return cache.nextDocumentId(prefix);
  }

  /** The collection's name. */
  public String name() {
    return cache.collection();
  }
}
