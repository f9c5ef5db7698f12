// CPU scheduling: how the kernel lets hilo_server's threads take a core
// from whatever runs on it (--cpu_scheduling).
//
// A NextRange passes through three kinds of thread: a gRPC polling thread
// reads it and queues it, the store's committer commits its batch and
// sends the replies, and gRPC's executor finishes the sends the committer
// found a transport busy with. Under the kernel's default policy
// (SCHED_OTHER) a thread that wakes may preempt the one running on its
// core at once. That keeps the server prompt beside busy neighbours, but
// on a core the server has to itself its own threads preempt each other:
// each reply a client answers at once wakes a polling thread, which stops
// the committer halfway through its replies to queue a single request.
// Under SCHED_BATCH a thread that wakes does not preempt: it runs when the
// running thread sleeps or its time slice ends, so the committer sends a
// batch's replies in one go and a polling thread then reads every request
// that came meanwhile. On one 2-core machine, with the server on a core of
// its own, that gave 1.20 x the NextRange calls per second under h2load
// (1.12 x with h2load on the same two cores); beside a process that kept
// the server's core busy, a call waited for that process's time slice
// (3.8 ms instead of 0.16 ms). BENCHMARKS.md, History, 2026-12-06.
// The default, adaptive, takes the gain only while the server is busy
// (from 16 calls in flight until few are, BusyScheduling,
// service/rpc/busy_scheduling.h): MoveProcessThreads puts every thread of
// the process under SCHED_BATCH, and then back under SCHED_OTHER, so the
// calls of a calm server still preempt a busy neighbour.
//
//   absl::StatusOr<CpuScheduling> s = ParseCpuScheduling("batch");
//   if (s.ok()) status = ApplyCpuScheduling(*s);  // before any thread starts
//   std::string name = CpuSchedulingName();       // "batch"
//
// The policy is per thread, and a thread starts with the policy of the
// thread that started it: apply it on the main thread before the first
// other thread of the process starts, and every thread has it.
#ifndef HILO_SERVICE_CPU_SCHEDULING_H_
#define HILO_SERVICE_CPU_SCHEDULING_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hilo {

enum class CpuScheduling {
  // The default: as kInherit at start; then, if the process started under
  // SCHED_OTHER, its threads go under SCHED_BATCH while the server is busy
  // (BusyScheduling and MoveProcessThreads).
  kAdaptive,
  // Leave the policy the process was started under (systemd's
  // CPUSchedulingPolicy=, chrt): the server makes no call.
  kInherit,
  // SCHED_OTHER: a thread that wakes may preempt.
  kNormal,
  // SCHED_BATCH: a thread that wakes waits for the running one.
  kBatch,
};

// "adaptive", "inherit", "normal" or "batch"; INVALID_ARGUMENT naming
// --cpu_scheduling otherwise.
absl::StatusOr<CpuScheduling> ParseCpuScheduling(absl::string_view name);

// Puts the calling thread under `scheduling` (the threads it starts later
// inherit it); kAdaptive and kInherit change nothing. FAILED_PRECONDITION
// naming the policy and the kernel's reason if the kernel refuses (leaving
// SCHED_IDLE without CAP_SYS_NICE, say); the thread's policy is then unchanged.
absl::Status ApplyCpuScheduling(CpuScheduling scheduling);

// The calling thread's policy as the flag names it ("normal", "batch"), or
// the kernel's name of one the flag does not set ("idle", "fifo", "rr",
// "deadline").
std::string CpuSchedulingName();

// What MoveProcessThreads did.
struct ThreadMoves {
  bool listed = true;  // false: /proc/self/task could not be read
  int moved = 0;       // threads it put under the policy
  int refused = 0;     // threads the kernel refused to move (in one pass)
  int error = 0;       // errno of the first refusal, or of the listing
};

// Puts every thread of this process that is under SCHED_OTHER or
// SCHED_BATCH under SCHED_BATCH (`batch`) or SCHED_OTHER, keeping each
// thread's SCHED_RESET_ON_FORK. Threads under any other policy (idle,
// real-time, deadline) are left as they are, and so is a thread that ends
// meanwhile. A thread started while it runs takes its creator's policy,
// moved or not yet: it lists the threads again until a pass moves none (3
// passes at most). Costs three system calls a thread a pass, and reads
// /proc/self/task: for the rare moment the server's load changes.
ThreadMoves MoveProcessThreads(bool batch);

// What the server logs after MoveProcessThreads(batch) ran as it turned
// busy (batch) or calm: the threads refused and the kernel's reason, or why
// the threads could not be listed, and that they keep their policy. Empty
// when there is nothing to say: every thread listed moved or was one it
// leaves alone.
std::string DescribeThreadMoves(const ThreadMoves& moves, bool batch);

namespace internal {

// MoveProcessThreads with the listing of the process's threads given:
// `list` fills in the ids of the threads it finds and returns 0, or returns
// the errno of a listing that failed. MoveProcessThreads lists
// /proc/self/task; tests list what a pass would find at a given moment.
ThreadMoves MoveThreads(bool batch,
                        absl::FunctionRef<int(std::vector<pid_t>*)> list);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_CPU_SCHEDULING_H_
