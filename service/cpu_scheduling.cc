#include "service/cpu_scheduling.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace hilo {

absl::StatusOr<CpuScheduling> ParseCpuScheduling(absl::string_view name) {
  if (name == "normal") return CpuScheduling::kNormal;
  if (name == "batch") return CpuScheduling::kBatch;
  // Bounded before it is quoted: the flag's value is the operator's text.
  constexpr size_t kQuoted = 32;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--cpu_scheduling is \"%s%s\"; it must be normal (the default: a "
      "thread that wakes may preempt) or batch (a host of the server's own: "
      "its threads do not preempt each other)",
      absl::CHexEscape(name.substr(0, kQuoted)),
      name.size() > kQuoted ? "..." : ""));
}

absl::Status ApplyCpuScheduling(CpuScheduling scheduling) {
  const int policy =
      scheduling == CpuScheduling::kBatch ? SCHED_BATCH : SCHED_OTHER;
  // Non-real-time policies take priority 0; pid 0 is the calling thread.
  sched_param param{};
  if (sched_setscheduler(0, policy, &param) != 0) {
    const int error = errno;
    return absl::FailedPreconditionError(absl::StrFormat(
        "--cpu_scheduling=%s: the kernel refused the policy %s: %s",
        scheduling == CpuScheduling::kBatch ? "batch" : "normal",
        scheduling == CpuScheduling::kBatch ? "SCHED_BATCH" : "SCHED_OTHER",
        std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace hilo
