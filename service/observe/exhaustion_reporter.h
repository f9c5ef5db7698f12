// ExhaustionReporter: logs a collection whose Max passes a share of
// INT64_MAX, long before its numbers run out.
//
// No workload reaches the default share (1/16 of INT64_MAX, 5.8e17) by
// handing out IDs: at a million IDs a second that takes 18,000 years. A
// collection up there got there by a pushed Max (a last_max or a floor
// far above it), which deserves a person's attention while 15/16 of the
// space is left. The line is written once per collection crossing (and
// again only if the process restarts), through a LogLimiter; the
// hilo_collection_max_share gauge (Metrics) carries the same fact, without
// the name, for alerts.
//
// Thread-safe.
#ifndef HILO_SERVICE_OBSERVE_EXHAUSTION_REPORTER_H_
#define HILO_SERVICE_OBSERVE_EXHAUSTION_REPORTER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "hilo/base/mutex.h"
#include "service/observe/log_limiter.h"
#include "service/observe/observer.h"

namespace hilo {

inline constexpr double kDefaultExhaustionShare = 1.0 / 16;

class ExhaustionReporter final : public Observer {
 public:
  // Reports a collection once its Max reaches `share` (0 < share <= 1) of
  // INT64_MAX, by passing a line to `log` (StderrLines() if null), on the
  // calling thread: `log` must not wait for a reader. `clock` (one that
  // never goes back, such as MonotonicClock) paces
  // the LogLimiter and must outlive this.
  ExhaustionReporter(double share, const Clock* clock,
                     std::function<void(const std::string&)> log = nullptr);

  void OnNextRange(absl::string_view collection, const absl::Status& status,
                   const Range* range, absl::Duration elapsed) override;
  void OnReturnRange(absl::string_view, const absl::Status&,
                     const ReturnOutcome*, absl::Duration) override {}
  void OnSetFloor(absl::string_view collection, const absl::Status& status,
                  const FloorOutcome* outcome) override;

 private:
  void Saw(absl::string_view collection, int64_t max);

  const double share_;
  const int64_t threshold_;
  std::function<void(const std::string&)> log_;
  LogLimiter limiter_;
  base::Mutex mu_;
  // Collections already reported; bounded, the limiter bounds the rest.
  absl::flat_hash_set<std::string> reported_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_EXHAUSTION_REPORTER_H_
