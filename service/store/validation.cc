#include "service/store/validation.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo {
namespace {

// Decodes one UTF-8 sequence at name[*pos]. Returns the code point and
// advances *pos, or returns -1 if the bytes there are not valid UTF-8.
int32_t DecodeUtf8(absl::string_view s, size_t* pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(*pos);
  int len;
  int32_t cp;
  int32_t min_cp;
  if (b0 < 0x80) {
    ++*pos;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return -1;
  }
  if (*pos + len > s.size()) return -1;
  for (int i = 1; i < len; ++i) {
    const uint8_t b = byte(*pos + i);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return -1;
  }
  *pos += len;
  return cp;
}

}  // namespace

absl::Status ValidateCollectionName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("collection name is empty");
  }
  if (name.size() > kMaxCollectionNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("collection name is %d bytes; the limit is %d",
                        name.size(), kMaxCollectionNameBytes));
  }
  size_t pos = 0;
  while (pos < name.size()) {
    const size_t at = pos;
    const int32_t cp = DecodeUtf8(name, &pos);
    if (cp < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("collection name is not valid UTF-8 at byte %d", at));
    }
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collection name has control character U+%04X at byte %d", cp, at));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFloor(absl::string_view field, int64_t value,
                           absl::string_view collection) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is %d; it must not be negative", field, value));
  }
  if (value > kMaxFloor) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %d for collection \"%s\" is above the limit %d (2^62): no "
        "request may move a collection's Max that close to INT64_MAX; "
        "nothing was changed",
        field, value, collection, kMaxFloor));
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeTag(absl::string_view tag) {
  if (tag.empty() || tag.size() > kMaxNodeTagLength) {
    return absl::InvalidArgumentError(
        absl::StrFormat("node tag \"%s\" is %d characters; it must be 1 to %d",
                        tag, tag.size(), kMaxNodeTagLength));
  }
  for (char c : tag) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node tag \"%s\" has '%c'; only A-Z and 0-9 are allowed", tag, c));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodeTagFromHostname(absl::string_view hostname) {
  const size_t dash = hostname.rfind('-');
  uint32_t ordinal = 0;
  if (dash == absl::string_view::npos ||
      !absl::SimpleAtoi(hostname.substr(dash + 1), &ordinal) ||
      hostname.substr(dash + 1).find_first_not_of("0123456789") !=
          absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host name \"%s\" does not end in -<ordinal> like hilo-0", hostname));
  }
  std::string tag;
  int64_t n = int64_t{ordinal} + 1;  // bijective base 26: A=1 ... Z=26
  while (n > 0) {
    const int64_t digit = (n - 1) % 26;
    tag.insert(tag.begin(), static_cast<char>('A' + digit));
    n = (n - 1) / 26;
  }
  if (tag.size() > kMaxNodeTagLength) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host name \"%s\": ordinal %d needs a tag longer than %d letters",
        hostname, ordinal, kMaxNodeTagLength));
  }
  return tag;
}

std::vector<std::string> NodeTagsHashedFromHostname(absl::string_view hostname,
                                                    int count) {
  constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::vector<std::string> tags;
  // The i-th try hashes "<name>" then "<name>#i": more tries never change
  // the earlier tags.
  for (int attempt = 0; static_cast<int>(tags.size()) < count; ++attempt) {
    const std::string input = attempt == 0
                                  ? std::string(hostname)
                                  : absl::StrCat(hostname, "#", attempt);
    // FNV-1a, 64 bits: stable across versions and platforms, unlike
    // std::hash.
    uint64_t hash = 0xcbf29ce484222325;
    for (const char c : input) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3;
    }
    std::string tag;
    for (size_t i = 0; i < kMaxNodeTagLength; ++i) {
      tag.push_back(kDigits[hash % 36]);
      hash /= 36;
    }
    if (std::find(tags.begin(), tags.end(), tag) == tags.end()) {
      tags.push_back(std::move(tag));
    }
  }
  return tags;
}

}  // namespace hilo
