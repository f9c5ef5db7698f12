package io.hilo.client;

/**
 * What a {@link CollectionHandle} needs of its client's table of collections when a call on the handle's
 * cache fails or finds it forgotten: the client implements it, so that the handle does not depend on the
 * whole client (which makes handles).
 */
interface CacheTable {
  /** After a call on {@code cache} failed: forgets it if it never received a range. */
  void failed(RangeCache cache);

  /** For a caller that found {@code cache} forgotten: the collection's cache now. */
  RangeCache lookUpAgain(RangeCache cache);
}
