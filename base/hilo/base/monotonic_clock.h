// MonotonicClock: a Clock for windows and rates, which never goes back.
//
// The wall clock (SystemClock) is stepped by NTP or an operator; a window
// kept on it stops moving when it steps back (a 10-minute step blocked new
// collections for 11 minutes, issue 36 item 6) and ends early when it
// steps forward. Every window of hilo_server (the creations of the last
// minute, the log limiters, the PostgreSQL store's standby_left_grace)
// reads this one instead; tests inject a ManualClock in its place.
//
// Its Now() is not the time of day: it starts at an arbitrary point and
// only differences between two readings mean anything. Never put it in a
// message or a stored row.
//
//   const Clock* windows = MonotonicClock::Get();
//   CollectionLimit limit(max, existing, per_minute, windows);
//
// Thread-safe.
#ifndef HILO_BASE_MONOTONIC_CLOCK_H_
#define HILO_BASE_MONOTONIC_CLOCK_H_

#include <chrono>

#include "absl/time/time.h"
#include "hilo/base/clock.h"

namespace hilo {

class MonotonicClock final : public Clock {
 public:
  // A process-wide instance; never destroyed.
  static MonotonicClock* Get() {
    static MonotonicClock* const clock = new MonotonicClock();
    return clock;
  }
  // CLOCK_MONOTONIC (std::chrono::steady_clock) as a point after the Unix
  // epoch.
  absl::Time Now() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(
               std::chrono::steady_clock::now().time_since_epoch());
  }
};

}  // namespace hilo

#endif  // HILO_BASE_MONOTONIC_CLOCK_H_
