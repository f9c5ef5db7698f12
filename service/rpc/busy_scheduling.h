// BusyScheduling: tells when the server turns busy and when it turns calm
// again, from the calls in flight each call finds (--cpu_scheduling=adaptive).
//
// A NextRange is read by a gRPC thread, committed by the store's committer
// and answered by the committer. Under the kernel's default policy
// (SCHED_OTHER) a thread that wakes may preempt the one running on its
// core. When the server is busy, each reply the committer sends is
// answered at once by a client, which wakes a gRPC thread, which stops the
// committer halfway through its batch's replies to queue one request
// (service/cpu_scheduling.h). Under SCHED_BATCH a thread that wakes waits
// for the running one instead; but a lone call then also waits for a busy
// neighbour's time slice (3.8 ms instead of 0.26 ms, 1 call in flight, on
// one machine). So the server takes SCHED_BATCH only while it is busy:
// this class says when, and its owner moves the threads (the server:
// MoveProcessThreads, every thread of the process).
//
// Busy from the first call that finds `busy_from` calls in flight (itself
// included). Calm again at a call that finds `calm_at` or fewer when
// either `calm_calls` calls in a row found that few, or no call has found
// more for `calm_after`. The streak keeps a busy server from turning calm
// each time its calls in flight dip between two group commits; the time
// turns a server calm at its first call after a quiet spell, however few
// calls come. Nothing runs between calls: a server left idle after a
// burst stays busy until that first call. BENCHMARKS.md, History,
// 2026-12-06 (morning).
//
//   BusyScheduling busy({}, clock, [](bool b) { MoveProcessThreads(b); });
//   // on the thread about to serve a call, with the calls in flight now:
//   busy.Serving(calls.inside());
//
// `on_change` runs on the thread whose call turned the state, one run at a
// time, with the state as it is when its run begins, and never twice in a
// row with the same value: after a quick busy-calm-busy the owner may see
// only one change, and ends with the state the calls last set. While the
// server is calm, Serving costs one relaxed atomic load; while it is busy,
// a reading of the clock and a few relaxed atomic operations. Thread-safe.
#ifndef HILO_SERVICE_RPC_BUSY_SCHEDULING_H_
#define HILO_SERVICE_RPC_BUSY_SCHEDULING_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"

namespace hilo {

class BusyScheduling {
 public:
  struct Options {
    // The server is busy from a call that finds this many calls in flight...
    int64_t busy_from = 16;
    // ...until a call finds at most this many (below busy_from) after
    // `calm_calls` such calls in a row (at least 1), or after `calm_after`
    // without a call that found more.
    int64_t calm_at = 4;
    int64_t calm_calls = 64;
    absl::Duration calm_after = absl::Milliseconds(100);
  };

  // Calls `on_change(true)` when the server turns busy and
  // `on_change(false)` when it turns calm; it starts calm. `clock` (a
  // monotonic one in the server) must outlive this.
  BusyScheduling(Options options, const Clock* clock,
                 absl::AnyInvocable<void(bool busy)> on_change);
  BusyScheduling(const BusyScheduling&) = delete;
  BusyScheduling& operator=(const BusyScheduling&) = delete;

  // Called on the thread about to serve a call, with the calls in flight
  // (this one included). Runs on_change here if this call turns the state.
  void Serving(int64_t in_flight);

  // Whether the server is busy now.
  bool busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  // Runs on_change_ with busy_ as it is now, unless that is what it last
  // ran with.
  void Apply();

  const Options options_;
  const Clock* const clock_;
  std::atomic<bool> busy_{false};
  // Calls in a row that found at most calm_at, while busy.
  std::atomic<int64_t> calm_streak_{0};
  // When a call last found more than calm_at, while busy (Unix ns, stamped
  // at most once a millisecond).
  std::atomic<int64_t> loaded_at_{0};
  base::Mutex apply_mu_;
  bool applied_ ABSL_GUARDED_BY(apply_mu_) = false;
  absl::AnyInvocable<void(bool)> on_change_ ABSL_GUARDED_BY(apply_mu_);
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_BUSY_SCHEDULING_H_
