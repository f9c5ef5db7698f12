#include "service/rpc/busy_scheduling.h"

#include <sched.h>

#include <cstdint>

namespace hilo {
namespace {

// What this file knows of the calling thread's policy. The kernel keeps
// the policy per thread and only this file moves a serving thread, so a
// thread's own copy saves a system call on every call.
enum class ThreadPolicy : uint8_t {
  kUnseen,  // has not served a call yet
  kNormal,  // SCHED_OTHER
  kBatch,   // SCHED_BATCH, put there by Serving
  kLeft,    // under another policy, or the kernel refused: never moved
};

thread_local ThreadPolicy this_thread_policy = ThreadPolicy::kUnseen;

}  // namespace

BusyScheduling::BusyScheduling(Options options) : options_(options) {}

void BusyScheduling::Serving(int64_t in_flight) {
  // Two thresholds, so a load that hovers near one does not move threads
  // at every call. Concurrent calls may both flip busy_: each sees a load
  // that justifies its flip.
  bool busy = busy_.load(std::memory_order_relaxed);
  if (!busy && in_flight >= options_.busy_from) {
    busy = true;
    busy_.store(true, std::memory_order_relaxed);
  } else if (busy && in_flight <= options_.calm_at) {
    busy = false;
    busy_.store(false, std::memory_order_relaxed);
  }
  ThreadPolicy& mine = this_thread_policy;
  if (mine == ThreadPolicy::kUnseen) {
    mine = sched_getscheduler(0) == SCHED_OTHER ? ThreadPolicy::kNormal
                                                : ThreadPolicy::kLeft;
  }
  const ThreadPolicy wanted =
      busy ? ThreadPolicy::kBatch : ThreadPolicy::kNormal;
  if (mine == ThreadPolicy::kLeft || mine == wanted) return;
  // Non-real-time policies take priority 0; pid 0 is the calling thread.
  // Moving between SCHED_OTHER and SCHED_BATCH needs no privilege; a
  // seccomp filter may still refuse it.
  sched_param param{};
  if (sched_setscheduler(0, busy ? SCHED_BATCH : SCHED_OTHER, &param) != 0) {
    refusals_.fetch_add(1, std::memory_order_relaxed);
    mine = ThreadPolicy::kLeft;
    return;
  }
  mine = wanted;
}

}  // namespace hilo
