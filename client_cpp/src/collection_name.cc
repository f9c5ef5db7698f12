#include "client_cpp/src/collection_name.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace hilo::internal {
namespace {

constexpr absl::string_view kRule =
    "a collection is 1-256 bytes of UTF-8 without control characters";

}  // namespace

size_t InvalidUtf8At(absl::string_view name) {
  size_t i = 0;
  while (i < name.size()) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;  // bounds of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + n > name.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(name[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return i;
    }
    i += n;
  }
  return absl::string_view::npos;
}

absl::Status CheckCollectionName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("collection name is empty; ", kRule));
  }
  if (name.size() > kMaxCollectionNameBytes) {
    // Not quoted: it could be any size.
    return absl::InvalidArgumentError(
        absl::StrFormat("collection name is %d bytes; %s", name.size(), kRule));
  }
  if (const size_t at = InvalidUtf8At(name); at != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("collection name \"%s\" is not valid UTF-8 (at byte "
                        "%d); %s",
                        absl::CHexEscape(name), at, kRule));
  }
  // Well-formed: a control character is one byte below 0x20 or 0x7f (C0,
  // DEL), or 0xc2 followed by 0x80-0x9f (C1, U+0080-U+009F).
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool c1 = c == 0xc2 && i + 1 < name.size() &&
                    static_cast<unsigned char>(name[i + 1]) <= 0x9f;
    if (c < 0x20 || c == 0x7f || c1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collection name \"%s\" has a control character at byte %d; %s",
          absl::CHexEscape(name), i, kRule));
    }
  }
  return absl::OkStatus();
}

}  // namespace hilo::internal
