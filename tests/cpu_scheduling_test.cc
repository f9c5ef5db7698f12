// --cpu_scheduling's parsing, the policy it puts on a thread and on the
// threads that thread starts, and a refusal by the kernel. Each policy is
// set on a thread of its own (the policy is per thread), so the test's
// main thread keeps the one it was started under.
#include "service/cpu_scheduling.h"

#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::IsOkAndHolds;
using ::hilo::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(CpuSchedulingTest, ParsesTheFourNames) {
  EXPECT_THAT(ParseCpuScheduling("adaptive"),
              IsOkAndHolds(CpuScheduling::kAdaptive));
  EXPECT_THAT(ParseCpuScheduling("inherit"),
              IsOkAndHolds(CpuScheduling::kInherit));
  EXPECT_THAT(ParseCpuScheduling("normal"),
              IsOkAndHolds(CpuScheduling::kNormal));
  EXPECT_THAT(ParseCpuScheduling("batch"), IsOkAndHolds(CpuScheduling::kBatch));
}

TEST(CpuSchedulingTest, AnyOtherNameIsRefusedNamingTheFlagAndTheChoices) {
  for (const char* bad : {"", "BATCH", "fifo", "batch ", "idle", "auto"}) {
    EXPECT_THAT(ParseCpuScheduling(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         StartsWith("--cpu_scheduling is \"")))
        << bad;
  }
  EXPECT_THAT(ParseCpuScheduling("fifo"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("--cpu_scheduling is \"fifo\"; it must be "
                                  "adaptive (the default")));
}

// The operator's text is quoted escaped and cut short, never whole.
TEST(CpuSchedulingTest, ALongOrControlValueIsQuotedBoundedAndEscaped) {
  const std::string long_value(10000, 'x');
  absl::StatusOr<CpuScheduling> refused = ParseCpuScheduling(long_value);
  ASSERT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_LT(refused.status().message().size(), 400u);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("\"" + std::string(32, 'x') + "...\""));
  EXPECT_THAT(ParseCpuScheduling("a\nb"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"a\\nb\""), Not(HasSubstr("\n")))));
}

// What ApplyCpuScheduling returned on a thread of its own that started
// under `start_policy`, and the policy of that thread and of one it
// started after.
struct Applied {
  absl::Status status;
  int own_policy = -1;
  int started_policy = -1;
  std::string name;
};

Applied ApplyOnOwnThread(int start_policy, CpuScheduling scheduling) {
  Applied applied;
  std::thread([&] {
    sched_param param{};
    if (sched_setscheduler(0, start_policy, &param) != 0) {
      applied.status = absl::InternalError("cannot set the start policy");
      return;
    }
    applied.status = ApplyCpuScheduling(scheduling);
    applied.own_policy = sched_getscheduler(0);
    applied.name = CpuSchedulingName();
    std::thread([&] { applied.started_policy = sched_getscheduler(0); }).join();
  }).join();
  return applied;
}

struct Case {
  const char* name;
  int start_policy;
  CpuScheduling scheduling;
  int policy;  // the thread's and its child's, after
  const char* policy_name;
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

class CpuSchedulingApplyTest : public ::testing::TestWithParam<Case> {};

TEST_P(CpuSchedulingApplyTest, SetsTheThreadAndTheThreadsItStarts) {
  const Case& c = GetParam();
  const int policy_before = sched_getscheduler(0);
  const Applied applied = ApplyOnOwnThread(c.start_policy, c.scheduling);
  ASSERT_THAT(applied.status, IsOk());
  EXPECT_EQ(applied.own_policy, c.policy);
  EXPECT_EQ(applied.started_policy, c.policy);
  EXPECT_EQ(applied.name, c.policy_name);
  // Only that thread's: this one is as it was.
  EXPECT_EQ(sched_getscheduler(0), policy_before);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, CpuSchedulingApplyTest,
    ::testing::Values(Case{"BatchFromNormal", SCHED_OTHER,
                           CpuScheduling::kBatch, SCHED_BATCH, "batch"},
                      Case{"NormalFromBatch", SCHED_BATCH,
                           CpuScheduling::kNormal, SCHED_OTHER, "normal"},
                      Case{"InheritKeepsBatch", SCHED_BATCH,
                           CpuScheduling::kInherit, SCHED_BATCH, "batch"},
                      Case{"InheritKeepsIdle", SCHED_IDLE,
                           CpuScheduling::kInherit, SCHED_IDLE, "idle"},
                      Case{"InheritKeepsNormal", SCHED_OTHER,
                           CpuScheduling::kInherit, SCHED_OTHER, "normal"},
                      // At start, adaptive is inherit; BusyScheduling moves
                      // threads later (busy_scheduling_test).
                      Case{"AdaptiveKeepsNormal", SCHED_OTHER,
                           CpuScheduling::kAdaptive, SCHED_OTHER, "normal"},
                      Case{"AdaptiveKeepsBatch", SCHED_BATCH,
                           CpuScheduling::kAdaptive, SCHED_BATCH, "batch"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Drops CAP_SYS_NICE from this process (a no-op for one that lacks it):
// without it, a thread leaves SCHED_IDLE only as RLIMIT_NICE allows.
void DropSysNice() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) std::_Exit(10);
  const unsigned bit = 1u << (CAP_SYS_NICE % 32);
  data[CAP_SYS_NICE / 32].effective &= ~bit;
  data[CAP_SYS_NICE / 32].permitted &= ~bit;
  data[CAP_SYS_NICE / 32].inheritable &= ~bit;
  if (syscall(SYS_capset, &header, data) != 0) std::_Exit(11);
}

// In a process under SCHED_IDLE, with RLIMIT_NICE 0 and without
// CAP_SYS_NICE, applies kBatch and prints the outcome and the policy after
// it; exits 0 once it got that far.
[[noreturn]] void ApplyBatchWhereIdleMayNotBeLeft() {
  DropSysNice();
  const rlimit none{0, 0};
  if (setrlimit(RLIMIT_NICE, &none) != 0) std::_Exit(12);
  sched_param param{};
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) std::_Exit(13);
  const absl::Status refused = ApplyCpuScheduling(CpuScheduling::kBatch);
  std::fprintf(stderr, "[%s] [%s] now %d\n",
               absl::StatusCodeToString(refused.code()).c_str(),
               std::string(refused.message()).c_str(), sched_getscheduler(0));
  std::_Exit(0);
}

// Such a thread may not leave SCHED_IDLE: the refusal names the flag, both
// policies and the kernel's reason, and the thread stays where it was. In
// a child process: the capability and the limit are the process's.
TEST(CpuSchedulingDeathTest, AKernelRefusalNamesBothPoliciesAndChangesNothing) {
  EXPECT_EXIT(ApplyBatchWhereIdleMayNotBeLeft(), ::testing::ExitedWithCode(0),
              "\\[FAILED_PRECONDITION\\] \\[--cpu_scheduling=batch: the "
              "kernel refused the policy SCHED_BATCH to a thread now under "
              "idle: Operation not permitted\\] now 5");
}

}  // namespace
}  // namespace hilo
