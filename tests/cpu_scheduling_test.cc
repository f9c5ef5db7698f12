// --cpu_scheduling's parsing, and the policy it puts on a thread and on the
// threads that thread starts (each on a thread of its own: the policy is
// per thread, and the test's main thread keeps its own).
#include "service/cpu_scheduling.h"

#include <sched.h>

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

TEST(CpuSchedulingTest, ParsesTheTwoNames) {
  EXPECT_THAT(ParseCpuScheduling("normal"),
              IsOkAndHolds(CpuScheduling::kNormal));
  EXPECT_THAT(ParseCpuScheduling("batch"), IsOkAndHolds(CpuScheduling::kBatch));
}

TEST(CpuSchedulingTest, AnyOtherNameIsRefusedNamingTheFlagAndBothChoices) {
  for (const char* bad : {"", "BATCH", "fifo", "batch "}) {
    EXPECT_THAT(ParseCpuScheduling(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--cpu_scheduling is \"")))
        << bad;
  }
  EXPECT_THAT(
      ParseCpuScheduling("fifo"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::StartsWith("--cpu_scheduling is \"fifo\"; it must "
                                     "be normal (the default")));
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

// What ApplyCpuScheduling returned on a thread of its own, and the policy
// of that thread and of one it started after.
struct Applied {
  absl::Status status;
  int own_policy = -1;
  int started_policy = -1;
};

Applied ApplyOnOwnThread(CpuScheduling scheduling) {
  Applied applied;
  std::thread([&] {
    applied.status = ApplyCpuScheduling(scheduling);
    applied.own_policy = sched_getscheduler(0);
    std::thread([&] { applied.started_policy = sched_getscheduler(0); }).join();
  }).join();
  return applied;
}

TEST(CpuSchedulingTest, BatchIsTheThreadsPolicyAndThatOfTheThreadsItStarts) {
  const Applied applied = ApplyOnOwnThread(CpuScheduling::kBatch);
  ASSERT_THAT(applied.status, IsOk());
  EXPECT_EQ(applied.own_policy, SCHED_BATCH);
  EXPECT_EQ(applied.started_policy, SCHED_BATCH);
  // Only that thread's: this one is as it was.
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

TEST(CpuSchedulingTest, NormalPutsABatchThreadBackUnderTheDefaultPolicy) {
  Applied applied;
  std::thread([&] {
    sched_param param{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_BATCH, &param), 0);
    applied.status = ApplyCpuScheduling(CpuScheduling::kNormal);
    applied.own_policy = sched_getscheduler(0);
  }).join();
  ASSERT_THAT(applied.status, IsOk());
  EXPECT_EQ(applied.own_policy, SCHED_OTHER);
}

}  // namespace
}  // namespace hilo
