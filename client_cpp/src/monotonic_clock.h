// MonotonicClock: the clock every deadline of the client is measured on.
//
// The wall clock can step (NTP, an operator, a VM resumed from a snapshot):
// a deadline taken from it stretches when it steps back and runs out at once
// when it steps forward. The client measures time left, backoffs and
// timeouts on a monotonic clock instead, and hands gRPC its deadlines as
// spans (DeadlineIn), which gRPC measures on its own monotonic clock from the
// call's start.
//
//   const MonotonicClock& clock = MonotonicClock::Real();
//   const MonotonicClock::TimePoint give_up = After(clock.Now(), timeout);
//   ...
//   context.set_deadline(DeadlineIn(TimeLeft(clock.Now(), give_up)));
//
// Implementations are thread-safe. Tests pass their own, which moves only
// when they say, to show that nothing else moves the client's deadlines.
#ifndef HILO_CLIENT_CPP_SRC_MONOTONIC_CLOCK_H_
#define HILO_CLIENT_CPP_SRC_MONOTONIC_CLOCK_H_

#include <chrono>

#include "absl/time/time.h"
#include "grpc/support/time.h"

namespace hilo::internal {

class MonotonicClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~MonotonicClock() = default;

  // Now, on a clock that never steps.
  virtual TimePoint Now() const = 0;
  // Waits `duration` (a test's clock moves on by it instead).
  virtual void SleepFor(absl::Duration duration) const = 0;

  // std::chrono::steady_clock and a relative sleep.
  static const MonotonicClock& Real();
};

// The time from `now` to `deadline` (negative if it passed).
absl::Duration TimeLeft(MonotonicClock::TimePoint now,
                        MonotonicClock::TimePoint deadline);
// `duration` after `now`; the clock's end for a duration that does not fit.
MonotonicClock::TimePoint After(MonotonicClock::TimePoint now,
                                absl::Duration duration);

// A gRPC deadline `timeout` after the call starts: a span (GPR_TIMESPAN),
// which no later step of the wall clock can move. Negative counts as 0.
gpr_timespec DeadlineIn(absl::Duration timeout);

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_MONOTONIC_CLOCK_H_
