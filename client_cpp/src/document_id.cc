#include "client_cpp/src/document_id.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hilo::internal {

IdSuffix::IdSuffix(absl::string_view tag) {
  const size_t tag_size = std::min(tag.size(), NodeTag::kMaxSize);
  char bytes[kWordSize] = {};
  bytes[0] = '-';
  std::memcpy(bytes + 1, tag.data(), tag_size);
  bytes[kWordSize - 1] = static_cast<char>(1 + tag_size);
  std::memcpy(&word_, bytes, sizeof(word_));
}

DocumentIdFormat::DocumentIdFormat(absl::string_view collection, char separator)
    : prefix_(collection) {
  prefix_ += separator;
}

void DocumentIdFormat::AppendNegative(int64_t number, IdSuffix suffix,
                                      std::string* out) const {
  absl::StrAppend(out, prefix_, number, suffix.text());
}

}  // namespace hilo::internal
