// Clock: where the server reads the time, so tests can set it.
//
// The range-size rule compares a client's previous range_at with "now"; tests
// inject a ManualClock instead of sleeping.
//
//   hilo::ManualClock clock(absl::FromUnixSeconds(1000));
//   clock.Advance(absl::Seconds(45));
#ifndef HILO_BASE_CLOCK_H_
#define HILO_BASE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"

namespace hilo {

// A source of the current time. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The real wall clock. A process-wide instance; never destroyed.
class SystemClock final : public Clock {
 public:
  static SystemClock* Get();
  absl::Time Now() const override { return absl::Now(); }
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start) : now_(start) {}

  absl::Time Now() const override {
    base::MutexLock lock(&mu_);
    return now_;
  }
  void Set(absl::Time t) {
    base::MutexLock lock(&mu_);
    now_ = t;
  }
  void Advance(absl::Duration d) {
    base::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable base::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

inline SystemClock* SystemClock::Get() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

}  // namespace hilo

#endif  // HILO_BASE_CLOCK_H_
