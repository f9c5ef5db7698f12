#include "service/authz_reloader.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hilo {

std::optional<std::string> AuthzReloader::Reload() {
  const int64_t before = server_->authz_generation();
  absl::Status reloaded = server_->ReloadAuthz();
  if (!reloaded.ok()) {
    if (reloaded.message() == last_error_) return std::nullopt;
    last_error_ = std::string(reloaded.message());
    return absl::StrCat("hilo_server: ", reloaded.message(),
                        "; keeping the policy in force");
  }
  last_error_.clear();
  if (server_->authz_generation() == before) return std::nullopt;
  const ServerOptions& options = server_->options();
  return absl::StrCat(
      "hilo_server: authz policy ", options.authz_policy, " reloaded",
      server_->authz_tokens_missing()
          ? absl::StrCat("; authz token file ", options.authz_tokens,
                         " is gone: every bearer token is refused until it "
                         "is back")
          : "");
}

}  // namespace hilo
