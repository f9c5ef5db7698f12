#include "service/observe/log_limiter.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/base/monotonic_clock.h"

namespace hilo {

LogLimiter::LogLimiter(int lines_per_second, size_t max_line_bytes,
                       const Clock* clock)
    : lines_per_second_(lines_per_second),
      max_line_bytes_(max_line_bytes),
      clock_(clock != nullptr ? clock : MonotonicClock::Get()) {}

std::optional<std::string> LogLimiter::Admit(absl::string_view message) {
  int64_t dropped = 0;
  {
    base::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    if (now - window_start_ >= absl::Seconds(1) || now < window_start_) {
      window_start_ = now;
      lines_in_window_ = 0;
    }
    if (lines_in_window_ >= lines_per_second_) {
      ++dropped_;
      return std::nullopt;
    }
    ++lines_in_window_;
    dropped = dropped_;
    dropped_ = 0;
  }
  const bool cut = message.size() > max_line_bytes_;
  std::string line = absl::CHexEscape(message.substr(0, max_line_bytes_));
  if (cut) {
    absl::StrAppend(&line, absl::StrFormat("... (%d bytes more)",
                                           message.size() - max_line_bytes_));
  }
  if (dropped > 0) {
    absl::StrAppend(
        &line, absl::StrFormat(" (%d lines dropped before this one)", dropped));
  }
  return line;
}

}  // namespace hilo
