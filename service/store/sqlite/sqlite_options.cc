#include "service/store/sqlite/sqlite_options.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hilo {

absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "full") return SyncMode::kFull;
  if (lower == "normal") return SyncMode::kNormal;
  return absl::InvalidArgumentError(
      absl::StrCat("sync mode \"", text, "\" is unknown; use full or normal"));
}

absl::string_view SyncModeName(SyncMode mode) {
  return mode == SyncMode::kFull ? "full" : "normal";
}

}  // namespace hilo
