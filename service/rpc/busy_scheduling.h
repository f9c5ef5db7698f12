// BusyScheduling: while many calls are in flight, the threads that serve
// them stop preempting the store's committer (--cpu_scheduling=adaptive).
//
// A NextRange is read by a gRPC thread, committed by the store's committer
// and answered by the committer. Under the kernel's default policy
// (SCHED_OTHER) a thread that wakes may preempt the one running on its
// core. When the server is busy, each reply the committer sends is
// answered at once by a client, which wakes a gRPC thread, which stops the
// committer halfway through its batch's replies to queue one request
// (service/cpu_scheduling.h). Under SCHED_BATCH a thread that wakes waits
// for the running one instead. Put on every thread (--cpu_scheduling=batch)
// that also makes a lone call wait for a busy neighbour's time slice: 3.8
// ms instead of 0.16 ms, 1 call in flight, on one machine. This class puts
// only the threads that serve calls under SCHED_BATCH, and only while the
// server is busy: from `busy_from` calls in flight until they fall to
// `calm_at`. A call that finds its thread under the other policy moves the
// thread (one system call), so a thread follows the load at its next call.
// A lone call finds the server calm and its thread under SCHED_OTHER.
// BENCHMARKS.md, History, 2026-12-06 (morning).
//
//   BusyScheduling busy({});
//   // on the thread about to serve a call, with the calls in flight now:
//   busy.Serving(calls.inside());
//
// A thread that was under another policy than SCHED_OTHER when it first
// served a call (the operator's `chrt`, systemd's CPUSchedulingPolicy=) is
// never moved; nor, after the kernel once refused to move it, is that
// thread again. The policy belongs to the thread, not to this object: a
// thread keeps it when the object is gone. Thread-safe.
#ifndef HILO_SERVICE_RPC_BUSY_SCHEDULING_H_
#define HILO_SERVICE_RPC_BUSY_SCHEDULING_H_

#include <atomic>
#include <cstdint>

namespace hilo {

class BusyScheduling {
 public:
  struct Options {
    // The server is busy from this many calls in flight...
    int64_t busy_from = 16;
    // ...until they are down to this many; below busy_from.
    int64_t calm_at = 4;
  };

  explicit BusyScheduling(Options options);
  BusyScheduling(const BusyScheduling&) = delete;
  BusyScheduling& operator=(const BusyScheduling&) = delete;

  // Called on the thread about to serve a call, with the calls in flight
  // (this one included): moves the thread to SCHED_BATCH if the server is
  // busy, back to SCHED_OTHER if it is calm.
  void Serving(int64_t in_flight);

  // Whether the server was busy at the last call.
  bool busy() const { return busy_.load(std::memory_order_relaxed); }
  // How many times the kernel refused to move a thread.
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const Options options_;
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> refusals_{0};
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_BUSY_SCHEDULING_H_
