#include "service/rpc/busy_scheduling.h"

#include <utility>

namespace hilo {

BusyScheduling::BusyScheduling(Options options, const Clock* clock,
                               absl::AnyInvocable<void(bool busy)> on_change)
    : options_(options), clock_(clock), on_change_(std::move(on_change)) {}

void BusyScheduling::Serving(int64_t in_flight) {
  if (!busy_.load(std::memory_order_relaxed)) {
    if (in_flight < options_.busy_from) return;  // calm stays calm
    calm_streak_.store(0, std::memory_order_relaxed);
    loaded_at_.store(absl::ToUnixNanos(clock_->Now()),
                     std::memory_order_relaxed);
    // Of concurrent calls that turn it, one runs Apply (the others find
    // it busy already); Apply reads the state under its own lock.
    if (!busy_.exchange(true, std::memory_order_relaxed)) Apply();
    return;
  }
  const int64_t now = absl::ToUnixNanos(clock_->Now());
  const int64_t loaded_at = loaded_at_.load(std::memory_order_relaxed);
  if (in_flight > options_.calm_at) {
    // Written only when there is something to change: a busy server's
    // calls mostly find the streak at 0 and the stamp under 1 ms old.
    if (calm_streak_.load(std::memory_order_relaxed) != 0) {
      calm_streak_.store(0, std::memory_order_relaxed);
    }
    if (now - loaded_at >= 1'000'000) {
      loaded_at_.store(now, std::memory_order_relaxed);
    }
    return;
  }
  const bool quiet =
      now - loaded_at >= absl::ToInt64Nanoseconds(options_.calm_after);
  if (!quiet && calm_streak_.fetch_add(1, std::memory_order_relaxed) + 1 <
                    options_.calm_calls) {
    return;
  }
  calm_streak_.store(0, std::memory_order_relaxed);
  if (busy_.exchange(false, std::memory_order_relaxed)) Apply();
}

void BusyScheduling::Apply() {
  base::MutexLock lock(&apply_mu_);
  const bool busy = busy_.load(std::memory_order_relaxed);
  if (busy == applied_) return;
  applied_ = busy;
  on_change_(busy);
}

}  // namespace hilo
