#include "stress/code_counts.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hilo::stress {

std::string CodeName(int code) {
  if (code < 0) return "NONE";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

absl::StatusOr<int> CodeOf(absl::string_view name) {
  for (int code = 0; code <= 16; ++code) {
    if (CodeName(code) == name) return code;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is not a status code name"));
}

std::string FormatCodes(const CodeCounts& counts) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : counts) {
    parts.push_back(absl::StrCat(CodeName(code), ":", n));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

}  // namespace hilo::stress
