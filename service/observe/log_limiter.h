// LogLimiter: keeps a flood of bad requests from flooding the log.
//
// gRPC logs a line for many malformed requests (a bad `te` header, a broken
// frame); a client sending thousands a second would write megabytes a
// second to stderr. A LogLimiter lets at most `lines_per_second` lines
// through in each second, cuts each to `max_line_bytes` (escaping control
// characters, so a request cannot forge log lines), and tells, on the next
// line it lets through, how many it dropped.
//
//   LogLimiter limiter(10, 256, SystemClock::Get());
//   if (std::optional<std::string> line = limiter.Admit(message)) print(*line);
//
// Thread-safe.
#ifndef HILO_SERVICE_OBSERVE_LOG_LIMITER_H_
#define HILO_SERVICE_OBSERVE_LOG_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"

namespace hilo {

class LogLimiter {
 public:
  // `clock` paces the seconds and must outlive the limiter; null means
  // MonotonicClock. A wall clock stepped back starts a new second rather
  // than silencing the log until it catches up.
  LogLimiter(int lines_per_second, size_t max_line_bytes,
             const Clock* clock = nullptr);

  // The line to write for `message`, or nullopt to drop it.
  std::optional<std::string> Admit(absl::string_view message);

 private:
  const int lines_per_second_;
  const size_t max_line_bytes_;
  const Clock* const clock_;
  base::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int lines_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_LOG_LIMITER_H_
