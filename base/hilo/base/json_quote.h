// JsonQuote: a string as a JSON string literal, for the programs that print
// JSON by hand (the hilo CLI's --json, the C++ conformance driver).
//
//   std::string line = absl::StrCat("{\"name\": ", hilo::base::JsonQuote(n),
//   "}");
#ifndef HILO_BASE_JSON_QUOTE_H_
#define HILO_BASE_JSON_QUOTE_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace hilo::base {

// `text` in double quotes with '"', '\\' and control characters escaped;
// other bytes (UTF-8 included) are copied as they are.
inline std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace hilo::base

#endif  // HILO_BASE_JSON_QUOTE_H_
