package io.hilo.client;

/**
 * What a {@link CollectionHandle} needs of its client's table of collections: its collection's cache on
 * its first call or after finding the one it had forgotten, and forgetting it when a call on it fails. The
 * client implements it, so that the handle does not depend on the whole client (which makes handles).
 */
interface CacheTable {
  /** After a call on {@code cache} failed: forgets it if it never received a range. */
  void failed(RangeCache cache);

  /**
   * For a handle of {@code collection} whose cache {@code had} is forgotten ({@link
   * RangeCache#NOT_LOOKED_UP} on its first call): the collection's cache now, made and put in the table if
   * absent. Throws FAILED_PRECONDITION once the client is closed.
   */
  RangeCache lookUp(RangeCache had, String collection);
}
