// --cpu_scheduling's parsing, the policy it puts on a thread and on the
// threads that thread starts, and a refusal by the kernel; and
// MoveProcessThreads, which adaptive scheduling moves every thread with.
// Applying a policy happens on a thread of its own (the policy is per
// thread), so the test's main thread keeps the one it was started under;
// MoveProcessThreads moves every thread, the main one included, so those
// tests put it under SCHED_OTHER first (each test runs in a process of its
// own under ctest).
#include "service/cpu_scheduling.h"

#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/process_threads.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::IsOkAndHolds;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
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

// SCHED_RESET_ON_FORK, as sched_getscheduler reports it.
constexpr int kResetOnFork = 0x40000000;

// A thread that takes `policy`, says its id, and waits until told to end.
class ParkedThread {
 public:
  explicit ParkedThread(int policy)
      : thread_([this, policy] {
          sched_param param{};
          set_ = sched_setscheduler(0, policy, &param) == 0;
          tid_ = gettid();
          ready_.Notify();
          end_.WaitForNotification();
        }) {
    ready_.WaitForNotification();
  }
  ~ParkedThread() {
    end_.Notify();
    thread_.join();
  }
  bool set() const { return set_; }
  pid_t tid() const { return tid_; }
  int policy() const { return sched_getscheduler(tid_); }

 private:
  bool set_ = false;
  pid_t tid_ = 0;
  Notification ready_;
  Notification end_;
  std::thread thread_;
};

// Every thread under the default policy or SCHED_BATCH moves, this one
// and those parked alike, SCHED_RESET_ON_FORK kept; one under SCHED_IDLE
// stays where it is. And back.
TEST(MoveProcessThreadsTest, MovesEveryDefaultOrBatchThreadAndNoOther) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  ParkedThread normal(SCHED_OTHER);
  ParkedThread batch(SCHED_BATCH);
  ParkedThread idle(SCHED_IDLE);
  ParkedThread reset(SCHED_OTHER | kResetOnFork);
  for (const ParkedThread* t : {&normal, &batch, &idle, &reset}) {
    ASSERT_TRUE(t->set());
  }

  ThreadMoves moves = MoveProcessThreads(true);
  EXPECT_EQ(moves.refused, 0);
  EXPECT_EQ(moves.moved, 3);  // this thread, normal and reset
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  EXPECT_EQ(normal.policy(), SCHED_BATCH);
  EXPECT_EQ(batch.policy(), SCHED_BATCH);
  EXPECT_EQ(idle.policy(), SCHED_IDLE);
  EXPECT_EQ(reset.policy(), SCHED_BATCH | kResetOnFork);
  EXPECT_EQ(CpuSchedulingName(), "batch");

  moves = MoveProcessThreads(false);
  EXPECT_EQ(moves.refused, 0);
  EXPECT_EQ(moves.moved, 4);  // and batch
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_EQ(normal.policy(), SCHED_OTHER);
  EXPECT_EQ(batch.policy(), SCHED_OTHER);
  EXPECT_EQ(idle.policy(), SCHED_IDLE);
  EXPECT_EQ(reset.policy(), SCHED_OTHER | kResetOnFork);
  EXPECT_EQ(MoveProcessThreads(false).moved, 0);
}

// Refused for every thread: each is counted, the first reason kept, and
// no thread moved.
TEST(MoveProcessThreadsTest, RefusalsAreCountedWithTheirReasonAndMoveNothing) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  ParkedThread normal(SCHED_OTHER);
  ThreadMoves moves;
  std::thread([&] {
    ASSERT_THAT(testing_util::RefuseSystemCallOnThisThread(
                    SYS_sched_setscheduler, EPERM),
                IsOk());
    moves = MoveProcessThreads(true);
  }).join();
  EXPECT_EQ(moves.moved, 0);
  // The test's thread, normal, and the thread refused its own move.
  EXPECT_EQ(moves.refused, 3);
  EXPECT_EQ(moves.error, EPERM);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_EQ(normal.policy(), SCHED_OTHER);
}

// A thread that appears only in a later listing (one started meanwhile by
// a thread not yet moved) is moved in the pass that finds it; the passes
// end with the first that moves none.
TEST(MoveProcessThreadsTest, AThreadListedOnlyByALaterPassIsMovedThere) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  ParkedThread late(SCHED_OTHER);
  ASSERT_TRUE(late.set());
  int listings = 0;
  const ThreadMoves moves =
      internal::MoveThreads(true, [&](std::vector<pid_t>* tids) {
        tids->push_back(gettid());
        if (++listings > 1) tids->push_back(late.tid());
        return 0;
      });
  EXPECT_EQ(moves.moved, 2);
  EXPECT_EQ(moves.refused, 0);
  EXPECT_EQ(late.policy(), SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  EXPECT_EQ(listings, 3);  // one moved this thread, one late, one none
}

// Threads that keep appearing are chased for three passes, no more: the
// fourth parked thread, listed only from a fourth pass on, stays.
TEST(MoveProcessThreadsTest, ThreeListingsAtMost) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  ParkedThread t1(SCHED_OTHER);
  ParkedThread t2(SCHED_OTHER);
  ParkedThread t3(SCHED_OTHER);
  ParkedThread t4(SCHED_OTHER);
  const std::vector<const ParkedThread*> parked = {&t1, &t2, &t3, &t4};
  int listings = 0;
  const ThreadMoves moves =
      internal::MoveThreads(true, [&](std::vector<pid_t>* tids) {
        ++listings;
        for (int i = 0; i < listings && i < 4; ++i) {
          tids->push_back(parked[i]->tid());
        }
        return 0;
      });
  EXPECT_EQ(listings, 3);
  EXPECT_EQ(moves.moved, 3);
  std::vector<int> policies;
  for (const ParkedThread* t : parked) policies.push_back(t->policy());
  EXPECT_THAT(policies,
              ElementsAre(SCHED_BATCH, SCHED_BATCH, SCHED_BATCH, SCHED_OTHER));
}

// A child process that waits to be killed: a thread id that is not this
// process's.
class OtherProcess {
 public:
  OtherProcess() : pid_(fork()) {
    if (pid_ == 0) {
      for (;;) pause();
    }
  }
  ~OtherProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// An id in the listing that now names a thread of another process (the
// thread listed ended and the id was reused) is left alone, though the
// kernel would let this process move it.
TEST(MoveProcessThreadsTest, AThreadOfAnotherProcessIsNeverMoved) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  OtherProcess other;
  ASSERT_GT(other.pid(), 0);
  ASSERT_EQ(sched_getscheduler(other.pid()), SCHED_OTHER);
  const ThreadMoves moves =
      internal::MoveThreads(true, [&](std::vector<pid_t>* tids) {
        tids->push_back(gettid());
        tids->push_back(other.pid());
        return 0;
      });
  EXPECT_EQ(moves.moved, 1);
  EXPECT_EQ(moves.refused, 0);
  EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(other.pid()), SCHED_OTHER);
}

// A listing that fails moves nothing and keeps its reason.
TEST(MoveProcessThreadsTest, AListingThatFailsMovesNothingAndSaysWhy) {
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  const ThreadMoves moves =
      internal::MoveThreads(true, [](std::vector<pid_t>*) { return EMFILE; });
  EXPECT_FALSE(moves.listed);
  EXPECT_EQ(moves.error, EMFILE);
  EXPECT_EQ(moves.moved, 0);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

// The server's line: nothing when every thread moved; otherwise the
// policy, the count, the turn and the kernel's reason, or why the threads
// could not be listed.
TEST(DescribeThreadMovesTest, SaysNothingUnlessAThreadWasSparedAndWhyIfOne) {
  EXPECT_EQ(DescribeThreadMoves(ThreadMoves{true, 7, 0, 0}, true), "");
  EXPECT_EQ(DescribeThreadMoves(ThreadMoves{true, 0, 0, 0}, false), "");
  EXPECT_EQ(DescribeThreadMoves(ThreadMoves{true, 2, 3, EPERM}, true),
            "the kernel refused SCHED_BATCH to 3 thread(s) as the server "
            "turned busy: Operation not permitted; they keep their policy");
  EXPECT_EQ(DescribeThreadMoves(ThreadMoves{false, 0, 0, EMFILE}, false),
            "cannot list the server's threads to put them under SCHED_OTHER "
            "as it turned calm: Too many open files; they keep their policy "
            "until it turns again");
}

}  // namespace
}  // namespace hilo
