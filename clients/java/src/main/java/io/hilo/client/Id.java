package io.hilo.client;

/**
 * One number and the tag of the node whose range it came from. The pair, not the number alone, is unique:
 * two nodes may hand out the same number, each with its own tag.
 *
 * <p>The number is a {@code long} because hilo numbers run up to 2^63 - 1; the tag is a {@code String} of
 * 1-4 characters, each A-Z or 0-9 (a range with any other tag is never used).
 */
public record Id(long number, String nodeTag) {
  /** The document ID: {@code collection + separator + number + "-" + nodeTag}, e.g. "orders/10-A". */
  public String documentId(String collection, char separator) {
    return collection + separator + number + '-' + nodeTag;
  }
}
