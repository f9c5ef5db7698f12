#include "client_cpp/src/monotonic_clock.h"

#include <algorithm>
#include <cstdint>

#include "absl/time/clock.h"

namespace hilo::internal {
namespace {

class RealMonotonicClock final : public MonotonicClock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  // A relative sleep (nanosleep), which a wall-clock step does not move.
  void SleepFor(absl::Duration duration) const override {
    absl::SleepFor(duration);
  }
};

}  // namespace

const MonotonicClock& MonotonicClock::Real() {
  static const RealMonotonicClock* const clock = new RealMonotonicClock();
  return *clock;
}

absl::Duration TimeLeft(MonotonicClock::TimePoint now,
                        MonotonicClock::TimePoint deadline) {
  return absl::FromChrono(deadline - now);
}

MonotonicClock::TimePoint After(MonotonicClock::TimePoint now,
                                absl::Duration duration) {
  using Duration = MonotonicClock::TimePoint::duration;
  const Duration room = MonotonicClock::TimePoint::max() - now;
  if (duration >= absl::FromChrono(room))
    return MonotonicClock::TimePoint::max();
  return now + std::chrono::duration_cast<Duration>(
                   absl::ToChronoNanoseconds(duration));
}

gpr_timespec DeadlineIn(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return gpr_inf_future(GPR_TIMESPAN);
  const int64_t nanos = std::max<int64_t>(0, absl::ToInt64Nanoseconds(timeout));
  return gpr_time_from_nanos(nanos, GPR_TIMESPAN);
}

}  // namespace hilo::internal
