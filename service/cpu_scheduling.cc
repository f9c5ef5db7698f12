#include "service/cpu_scheduling.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo {
namespace {

// SCHED_DEADLINE is not in every libc's <sched.h>; the kernel's number.
constexpr int kSchedDeadline = 6;

// SCHED_RESET_ON_FORK is not in every libc's <sched.h>; the kernel's flag,
// which sched_getscheduler ORs into the policy of a thread that has it.
constexpr int kResetOnFork = 0x40000000;

// The flag's word for `policy`, or the kernel's for one it does not set.
std::string PolicyName(int policy) {
  switch (policy & ~kResetOnFork) {
    case SCHED_OTHER:
      return "normal";
    case SCHED_BATCH:
      return "batch";
    case SCHED_IDLE:
      return "idle";
    case SCHED_FIFO:
      return "fifo";
    case SCHED_RR:
      return "rr";
    case kSchedDeadline:
      return "deadline";
    default:
      return absl::StrCat("policy ", policy);
  }
}

}  // namespace

absl::StatusOr<CpuScheduling> ParseCpuScheduling(absl::string_view name) {
  if (name == "adaptive") return CpuScheduling::kAdaptive;
  if (name == "inherit") return CpuScheduling::kInherit;
  if (name == "normal") return CpuScheduling::kNormal;
  if (name == "batch") return CpuScheduling::kBatch;
  // Bounded before it is quoted: the flag's value is the operator's text.
  constexpr size_t kQuoted = 32;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--cpu_scheduling is \"%s%s\"; it must be adaptive (the default: "
      "inherit, and batch for every thread while the server is busy), "
      "inherit (the policy the server was started under), normal "
      "(a thread that wakes may preempt) or batch (a host of the server's "
      "own: its threads do not preempt each other)",
      absl::CHexEscape(name.substr(0, kQuoted)),
      name.size() > kQuoted ? "..." : ""));
}

absl::Status ApplyCpuScheduling(CpuScheduling scheduling) {
  if (scheduling == CpuScheduling::kAdaptive ||
      scheduling == CpuScheduling::kInherit) {
    return absl::OkStatus();
  }
  const int policy =
      scheduling == CpuScheduling::kBatch ? SCHED_BATCH : SCHED_OTHER;
  // Non-real-time policies take priority 0; pid 0 is the calling thread.
  sched_param param{};
  if (sched_setscheduler(0, policy, &param) != 0) {
    const int error = errno;
    return absl::FailedPreconditionError(absl::StrFormat(
        "--cpu_scheduling=%s: the kernel refused the policy %s to a thread "
        "now under %s: %s",
        PolicyName(policy),
        policy == SCHED_BATCH ? "SCHED_BATCH" : "SCHED_OTHER",
        PolicyName(sched_getscheduler(0)), std::strerror(error)));
  }
  return absl::OkStatus();
}

std::string CpuSchedulingName() { return PolicyName(sched_getscheduler(0)); }

namespace internal {

ThreadMoves MoveThreads(bool batch,
                        absl::FunctionRef<int(std::vector<pid_t>*)> list) {
  ThreadMoves moves;
  const int to = batch ? SCHED_BATCH : SCHED_OTHER;
  const pid_t pid = getpid();
  std::vector<pid_t> tids;
  // A thread started during a pass by a thread not yet moved has the old
  // policy and may be missing from the pass's listing: another pass.
  for (int pass = 0; pass < 3; ++pass) {
    tids.clear();
    if (const int error = list(&tids); error != 0) {
      moves.listed = false;
      moves.error = error;
      return moves;
    }
    int moved_now = 0;
    int refused_now = 0;
    for (const pid_t tid : tids) {
      const int policy = sched_getscheduler(tid);
      if (policy < 0) continue;  // the thread ended
      const int base = policy & ~kResetOnFork;
      if ((base != SCHED_OTHER && base != SCHED_BATCH) || base == to) continue;
      // Still a thread of this process: a thread that ended could have
      // left its id to another process's new thread.
      if (syscall(SYS_tgkill, pid, tid, 0) != 0) continue;
      // Non-real-time policies take priority 0.
      sched_param param{};
      if (sched_setscheduler(tid, to | (policy & kResetOnFork), &param) == 0) {
        ++moved_now;
      } else if (errno != ESRCH) {  // ESRCH: it ended meanwhile
        if (refused_now++ == 0 && moves.error == 0) moves.error = errno;
      }
    }
    moves.moved += moved_now;
    // A thread refused in one pass is refused again in the next.
    moves.refused = std::max(moves.refused, refused_now);
    if (moved_now == 0) break;
  }
  return moves;
}

}  // namespace internal

ThreadMoves MoveProcessThreads(bool batch) {
  return internal::MoveThreads(batch, [](std::vector<pid_t>* tids) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/task"),
                                            &closedir);
    if (dir == nullptr) return errno;
    while (const dirent* entry = readdir(dir.get())) {
      const int tid = std::atoi(entry->d_name);
      if (tid > 0) tids->push_back(tid);  // not "." or ".."
    }
    return 0;
  });
}

std::string DescribeThreadMoves(const ThreadMoves& moves, bool batch) {
  if (moves.listed && moves.refused == 0) return "";
  const char* policy = batch ? "SCHED_BATCH" : "SCHED_OTHER";
  const char* turned = batch ? "busy" : "calm";
  if (!moves.listed) {
    return absl::StrFormat(
        "cannot list the server's threads to put them under %s as it turned "
        "%s: %s; they keep their policy until it turns again",
        policy, turned, std::strerror(moves.error));
  }
  return absl::StrFormat(
      "the kernel refused %s to %d thread(s) as the server turned %s: %s; "
      "they keep their policy",
      policy, moves.refused, turned, std::strerror(moves.error));
}

}  // namespace hilo
