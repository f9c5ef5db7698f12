// Document IDs, "collection<separator>number-TAG", made in a few nanoseconds.
//
// An ID is three pieces, each prepared as early as it is known: the prefix
// (collection and separator) once per collection, the suffix ("-" and the
// node tag) once per range, and the number per ID. Making an ID is then a
// decimal conversion and a few stores into the caller's string:
//
//   DocumentIdFormat orders("orders", '/');
//   IdSuffix suffix("A");                      // when a range arrives
//   std::string id = orders.Make(10, suffix);  // "orders/10-A"
//   orders.Append(11, suffix, &buffer);        // appends "orders/11-A"
//
// Both classes are immutable values, safe to read from many threads at once.
#ifndef HILO_CLIENT_CPP_SRC_DOCUMENT_ID_H_
#define HILO_CLIENT_CPP_SRC_DOCUMENT_ID_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/strings/string_view.h"
#include "client_cpp/src/decimal.h"
#include "hilo/client.h"

namespace hilo::internal {

// The end of every document ID of one range: "-" and the range's node tag,
// packed in one word, so that a range is published with one store and an ID
// gets its suffix with one load. In memory the word's bytes are the text,
// then NUL padding, and its last byte is the text's length.
class IdSuffix {
 public:
  static constexpr size_t kMaxSize = 1 + NodeTag::kMaxSize;
  static constexpr size_t kWordSize = sizeof(uint64_t);

  // The empty suffix (no text at all).
  IdSuffix() = default;
  // "-" and `tag`, which must be a valid node tag (1 to NodeTag::kMaxSize
  // characters, as RangeCache::Fetch checks every range's): a longer one
  // aborts the process rather than be cut, since two tags cut to one would
  // merge two nodes' IDs.
  explicit IdSuffix(absl::string_view tag);

  // As stored and loaded by whoever keeps suffixes in an atomic word.
  static IdSuffix FromWord(uint64_t word) { return IdSuffix(word); }
  uint64_t word() const { return word_; }

  // The text's length, 1 + the tag's.
  ABSL_ATTRIBUTE_ALWAYS_INLINE size_t size() const {
    char bytes[kWordSize];
    std::memcpy(bytes, &word_, sizeof(bytes));
    return static_cast<unsigned char>(bytes[kWordSize - 1]);
  }
  // The tag, as a NodeTag (the text after the "-").
  ABSL_ATTRIBUTE_ALWAYS_INLINE NodeTag tag() const {
    char bytes[kWordSize];
    std::memcpy(bytes, &word_, sizeof(bytes));
    uint32_t chars;
    std::memcpy(&chars, bytes + 1, sizeof(chars));
    const size_t size = this->size();
    return NodeTag::FromPacked(chars, size > 0 ? size - 1 : 0);
  }

  // The text, valid as long as this IdSuffix.
  absl::string_view text() const {
    return absl::string_view(reinterpret_cast<const char*>(&word_), size());
  }

  // Writes the text to [end - size(), end) with one store of kWordSize
  // bytes to [end - kWordSize, end): the bytes before the text become
  // zeros, for the caller to write over.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void WriteEndingAt(char* end) const {
    // Move the text to the word's last bytes (in memory order); the length
    // byte falls out. (The empty suffix's word is 0, shifted by 0.)
    const unsigned shift = (8 * static_cast<unsigned>(kWordSize - size())) & 63;
    const uint64_t word = std::endian::native == std::endian::little
                              ? word_ << shift
                              : word_ >> shift;
    std::memcpy(end - kWordSize, &word, sizeof(word));
  }

 private:
  static_assert(kMaxSize < kWordSize, "the length needs the last byte");
  explicit IdSuffix(uint64_t word) : word_(word) {}
  uint64_t word_ = 0;
};

// The prefix of one collection's document IDs, and how to put an ID
// together behind it.
class DocumentIdFormat {
 public:
  DocumentIdFormat(absl::string_view collection, char separator);

  // Appends "collection<separator>number" and the suffix's text to *out,
  // growing it once. A number below 0 (no range holds one) is written with
  // its sign.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Append(int64_t number, IdSuffix suffix,
                                           std::string* out) const {
    if (ABSL_PREDICT_FALSE(number < 0)) {
      AppendNegative(number, suffix, out);
      return;
    }
    const auto n = static_cast<uint64_t>(number);
    const int digits = DecimalDigits(n);
    const size_t size = prefix_.size() + digits + suffix.size();
    const size_t old_size = out->size();
    out->resize(old_size + size);
    Write(n, digits, suffix, out->data() + old_size, size);
  }

  // The same ID as a new string, allocated at its size.
  ABSL_ATTRIBUTE_ALWAYS_INLINE std::string Make(int64_t number,
                                                IdSuffix suffix) const {
    std::string id;
    if (ABSL_PREDICT_FALSE(number < 0)) {
      AppendNegative(number, suffix, &id);
      return id;
    }
    const auto n = static_cast<uint64_t>(number);
    const int digits = DecimalDigits(n);
    const size_t size = prefix_.size() + digits + suffix.size();
    id.resize(size);
    Write(n, digits, suffix, id.data(), size);
    return id;
  }

  // "collection<separator>".
  const std::string& prefix() const { return prefix_; }

 private:
  // Writes the ID, `size` bytes, to id[0, size). Back to front, so that the
  // suffix can go in one word-wide store whose spill onto the digits'
  // bytes the digits then write over, and the digits' onto the prefix's.
  // (Writing the stack first and copying it whole made the copy wait for
  // the small stores it overlapped, which cost more than the rest.)
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Write(uint64_t number, int digits,
                                          IdSuffix suffix, char* id,
                                          size_t size) const {
    if (ABSL_PREDICT_TRUE(size >= IdSuffix::kWordSize)) {
      suffix.WriteEndingAt(id + size);
    } else {
      const absl::string_view text = suffix.text();
      std::memcpy(id + size - text.size(), text.data(), text.size());
    }
    WriteDecimal(number, digits, id + prefix_.size());
    std::memcpy(id, prefix_.data(), prefix_.size());
  }
  void AppendNegative(int64_t number, IdSuffix suffix, std::string* out) const;

  std::string prefix_;
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_DOCUMENT_ID_H_
