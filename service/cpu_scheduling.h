// CPU scheduling: how the kernel lets hilo_server's threads take a core
// from whatever runs on it (--cpu_scheduling).
//
// A NextRange passes through three kinds of thread: a gRPC polling thread
// reads it and queues it, the store's committer commits its batch and
// sends the replies, and gRPC's executor sometimes finishes a send the
// committer found a transport busy with. Under the kernel's normal policy
// (SCHED_OTHER) a thread that wakes may preempt the one running on its
// core at once. That keeps the server prompt beside busy neighbours, but
// on a core the server has to itself its own threads preempt each other:
// each reply a client answers at once wakes a polling thread, which stops
// the committer halfway through its replies to queue a single request.
// Under SCHED_BATCH a thread that wakes does not preempt: it runs when the
// running thread sleeps or its time slice ends, so the committer sends a
// batch's replies in one go and a polling thread then reads every request
// that came meanwhile. On a host of its own the server does about a tenth
// to a quarter more NextRange calls per second on the same CPU; beside a
// process that keeps a core busy, each reply can wait for that process's
// time slice (milliseconds). BENCHMARKS.md, History, 2026-12-06, has the
// figures.
//
//   absl::StatusOr<CpuScheduling> s = ParseCpuScheduling("batch");
//   if (s.ok()) status = ApplyCpuScheduling(*s);  // before any thread starts
//
// The policy is per thread, and a thread starts with the policy of the
// thread that started it: apply it on the main thread before the first
// other thread of the process starts, and every thread has it.
#ifndef HILO_SERVICE_CPU_SCHEDULING_H_
#define HILO_SERVICE_CPU_SCHEDULING_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hilo {

enum class CpuScheduling {
  // SCHED_OTHER: a thread that wakes may preempt. The default.
  kNormal,
  // SCHED_BATCH: a thread that wakes waits for the running one.
  kBatch,
};

// "normal" or "batch"; INVALID_ARGUMENT naming --cpu_scheduling otherwise.
absl::StatusOr<CpuScheduling> ParseCpuScheduling(absl::string_view name);

// Puts the calling thread under `scheduling` (the threads it starts later
// inherit it). FAILED_PRECONDITION naming the policy and the kernel's
// reason if the kernel refuses (a seccomp profile, say); the thread's
// policy is then unchanged.
absl::Status ApplyCpuScheduling(CpuScheduling scheduling);

}  // namespace hilo

#endif  // HILO_SERVICE_CPU_SCHEDULING_H_
