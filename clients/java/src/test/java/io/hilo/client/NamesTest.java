package io.hilo.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** How messages show a collection name (Names.quote): bounded, and escaped so that a log gets nothing raw. */
class NamesTest {
  @Test
  void a_name_of_up_to_256_chars_is_quoted_whole() {
    assertEquals("\"orders\"", Names.quote("orders"));
    assertEquals("\"café/ünïcödé 注文\"", Names.quote("café/ünïcödé 注文"));
    String longest = "x".repeat(256);
    assertEquals("\"" + longest + "\"", Names.quote(longest));
  }

  @Test
  void a_longer_name_shows_its_first_64_chars_and_its_length() {
    assertEquals("\"" + "x".repeat(64) + "\"... (257 characters)", Names.quote("x".repeat(257)));
    String huge = "y".repeat(1_000_000);
    assertEquals("\"" + "y".repeat(64) + "\"... (1000000 characters)", Names.quote(huge));
    // Escaped within the part shown, and the length counts characters, not UTF-16 units.
    assertEquals("\"\\n" + "z".repeat(63) + "\"... (300 characters)", Names.quote("\n" + "z".repeat(299)));
    assertEquals("\"" + "😀".repeat(32) + "\"... (200 characters)", Names.quote("😀".repeat(200)));
  }

  @Test
  void the_cut_never_splits_a_surrogate_pair() {
    String name = "a".repeat(63) + "😀".repeat(200);
    assertEquals("\"" + "a".repeat(63) + "\"... (263 characters)", Names.quote(name));
  }

  @Test
  void control_separator_format_and_lone_surrogate_chars_are_escaped() {
    assertEquals("\"a\\nb\\r\\tc\"", Names.quote("a\nb\r\tc"));
    assertEquals("\"q\\\"b\\\\s\"", Names.quote("q\"b\\s"));
    assertEquals("\"\\u0000\\u0001\\u001B[31m\\u007F\\u0085\\u009F\"",
        Names.quote("\u0000\u0001\u001b[31m\u007f\u0085\u009f"));
    // Line and paragraph separators, bidi overrides and zero-width characters: a log line would show them
    // as something else, or not at all.
    assertEquals("\"\\u2028\\u2029\\u202Eevil\\u200B\\uFEFF\"", Names.quote("\u2028\u2029\u202eevil\u200b\ufeff"));
    // A tag character (U+E0041, outside the BMP) is a format character too; a lone surrogate is no character.
    assertEquals("\"\\uDB40\\uDC41\"", Names.quote("\udb40\udc41"));
    assertEquals("\"a\\uD800b\\uDC00\"", Names.quote("a\ud800b\udc00"));
    assertEquals("\"😀\"", Names.quote("😀"));
  }

  @Test
  void a_text_from_elsewhere_is_escaped_unquoted_and_bounded() {
    assertEquals("collection \"a\\u2028b\\u202E\" is \\\\ new\\n",
        Names.text("collection \"a\u2028b\u202E\" is \\ new\n"));
    assertEquals("x".repeat(1024), Names.text("x".repeat(1024)));
    assertEquals("x".repeat(1024) + "... (5000 characters)", Names.text("x".repeat(5000)));
    assertEquals("a".repeat(1023) + "... (1223 characters)", Names.text("a".repeat(1023) + "😀".repeat(200)));
  }
}
