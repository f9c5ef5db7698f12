package io.hilo.client;

/**
 * A collection name as messages and log lines show it. A name is the caller's (its own users' input, say),
 * of any length and holding any character, so a message never copies it as it is: it is quoted and
 * escaped (a newline, an ESC, a bidi override never reaches a log raw), whole up to {@value #WHOLE}
 * characters (a name a node takes has at most 256 bytes), else its first {@value #PREFIX} characters and
 * its length. Every message that names a collection shows it through {@link #quote}.
 */
final class Names {
  /** Names of up to this many chars are shown whole. */
  static final int WHOLE = 256;
  /** How many chars of a longer name are shown (one less where the last would split a surrogate pair). */
  static final int PREFIX = 64;
  /** How many chars of a text from elsewhere ({@link #text}) are shown at most. */
  static final int TEXT = 1024;

  private Names() {}

  /**
   * {@code name} quoted for a message: {@code "orders"}; past {@value #WHOLE} chars, {@code "xxx..."...
   * (1000000 characters)}. Escaped as in Java source: {@code \"}, {@code \\}, {@code \n}, {@code \r},
   * {@code \t}, and {@code \}{@code uXXXX} for any other control character (C0, DEL, C1), a line or
   * paragraph separator, a format character (bidi controls, zero-width ones) and half a surrogate pair.
   */
  static String quote(String name) {
    if (name.length() <= WHOLE) return escape(name, name.length());
    int cut = PREFIX;
    if (Character.isHighSurrogate(name.charAt(cut - 1)) && Character.isLowSurrogate(name.charAt(cut))) cut--;
    return escape(name, cut) + "... (" + name.codePointCount(0, name.length()) + " characters)";
  }

  /**
   * {@code text} from elsewhere (a server's status description, which may hold a name as the caller gave
   * it, formatted with "%s") for a message: escaped as {@link #quote} escapes, but not quoted and with its
   * own {@code "} kept; past {@value #TEXT} chars, its first {@value #TEXT} and {@code ... (N characters)}.
   */
  static String text(String text) {
    if (text.length() <= TEXT) return escape(text, text.length(), false);
    int cut = TEXT;
    if (Character.isHighSurrogate(text.charAt(cut - 1)) && Character.isLowSurrogate(text.charAt(cut))) cut--;
    return escape(text, cut, false) + "... (" + text.codePointCount(0, text.length()) + " characters)";
  }

  private static String escape(String name, int end) {
    return escape(name, end, true);
  }

  private static String escape(String name, int end, boolean quoted) {
    StringBuilder out = new StringBuilder(end + 2);
    if (quoted) out.append('"');
    for (int i = 0; i < end; i++) {
      char c = name.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(name.charAt(i + 1))) {
        int cp = name.codePointAt(i);
        if (Character.getType(cp) == Character.FORMAT) {
          appendUnicode(out, c);
          appendUnicode(out, name.charAt(i + 1));
        } else {
          out.append(c).append(name.charAt(i + 1));
        }
        i++;
        continue;
      }
      switch (c) {
        case '"' -> out.append(quoted ? "\\\"" : "\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (unsafe(c)) appendUnicode(out, c);
          else out.append(c);
        }
      }
    }
    return quoted ? out.append('"').toString() : out.toString();
  }

  /** A char a log must not get raw: a control, separator or format character, or half a surrogate pair. */
  private static boolean unsafe(char c) {
    if (Character.isISOControl(c) || Character.isSurrogate(c)) return true;
    int type = Character.getType(c);
    return type == Character.LINE_SEPARATOR || type == Character.PARAGRAPH_SEPARATOR || type == Character.FORMAT;
  }

  private static void appendUnicode(StringBuilder out, char c) {
    out.append(String.format("\\u%04X", (int) c));
  }
}
