#include "client_cpp/src/document_id.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hilo::internal {

IdSuffix::IdSuffix(absl::string_view tag) {
  if (tag.size() > NodeTag::kMaxSize) {
    // Unreachable from a checked range: a bug in the caller, not bad input.
    std::fprintf(stderr,
                 "hilo client: node tag \"%.*s\" is longer than %zu "
                 "characters and cannot end a document ID\n",
                 static_cast<int>(std::min<size_t>(tag.size(), 64)), tag.data(),
                 NodeTag::kMaxSize);
    std::abort();
  }
  const size_t tag_size = tag.size();
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
