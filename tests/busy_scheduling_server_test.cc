// A server that moves its threads with BusyScheduling (hilo_server's
// --cpu_scheduling=adaptive), in process: every thread under SCHED_BATCH
// while it holds 20 calls, and back once calm; none moved without the
// option. BusyScheduling's own rules: busy_scheduling_test.cc.
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "testing/held_calls.h"
#include "testing/process_threads.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::ManualClock;
using ::hilo::testing_util::HeldNextRanges;
using ::hilo::testing_util::HoldCommitsUntil;
using ::hilo::testing_util::NewStub;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StartServer;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::TestServerOptions;
using ::hilo::testing_util::ThreadPolicies;
using ::testing::IsEmpty;

// The ids of this process's threads under `policy`.
std::set<pid_t> ThreadsUnder(int policy) {
  std::set<pid_t> tids;
  for (const auto& [tid, p] : ThreadPolicies(getpid())) {
    if (p == policy) tids.insert(tid);
  }
  return tids;
}

// The ids of this process's threads.
std::set<pid_t> Threads() {
  std::set<pid_t> tids;
  for (const auto& [tid, p] : ThreadPolicies(getpid())) tids.insert(tid);
  return tids;
}

// `tids` that are still threads of this process and not under `policy`.
std::set<pid_t> NotUnder(const std::set<pid_t>& tids, int policy) {
  std::set<pid_t> off;
  for (const auto& [tid, p] : ThreadPolicies(getpid())) {
    if (tids.count(tid) > 0 && p != policy) off.insert(tid);
  }
  return off;
}

// A server holds 20 NextRange calls in flight (its store's commit waits):
// busy. With batch_when_busy (the parameter) every thread of the process
// goes under SCHED_BATCH, the committer's and this test's included, and
// back under SCHED_OTHER by the 64th call in a row that finds the server
// calm (the clock stands still), not before the 60th; without it no thread
// ever moves. Either way every call gets its own range.
class BusySchedulingServerTest : public ::testing::TestWithParam<bool> {};

TEST_P(BusySchedulingServerTest, EveryThreadStopsPreemptingWhileBusy) {
  const bool batch_when_busy = GetParam();
  // The server's threads start under this thread's policy.
  const int own_policy = sched_getscheduler(0);
  sched_param param{};
  if (sched_setscheduler(0, SCHED_OTHER, &param) != 0) {
    GTEST_SKIP() << "this process may not take SCHED_OTHER (under "
                    "SCHED_IDLE without CAP_SYS_NICE?)";
  }
  absl::Cleanup restore = [&] { sched_setscheduler(0, own_policy, &param); };
  TempDir dir;
  Notification release;
  // Time stands still: calm comes from the streak of calls alone.
  ManualClock window_clock(absl::FromUnixSeconds(1'000'000));
  ServerOptions options = TestServerOptions(dir);
  options.window_clock = &window_clock;
  options.batch_when_busy = batch_when_busy;
  options.before_commit_for_testing = HoldCommitsUntil(release);
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  ASSERT_THAT(ThreadsUnder(SCHED_BATCH), IsEmpty());
  const std::set<pid_t> before = Threads();

  constexpr int kCalls = 20;
  // Each call on a channel of its own. Let go and joined whatever fails.
  HeldNextRanges held(*server, release, kCalls);
  ASSERT_TRUE(held.AllInServices());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  if (batch_when_busy) {
    // Every thread there was before the calls (those that still are), once
    // the sweep the 16th call began has ended; bounded.
    while (!NotUnder(before, SCHED_BATCH).empty() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_THAT(NotUnder(before, SCHED_BATCH), IsEmpty());
  } else {
    EXPECT_THAT(ThreadsUnder(SCHED_BATCH), IsEmpty());
  }

  std::vector<std::pair<int64_t, int64_t>> ranges = held.Release();
  ASSERT_EQ(ranges.size(), kCalls);
  // 20 ranges of 32, together exactly 1..640.
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(ranges[i],
              std::make_pair(int64_t{32} * i + 1, int64_t{32} * (i + 1)));
  }

  // One call at a time: calm at the 64th. A held call that read its
  // count (at most 4) before the 16th turned the server busy may have
  // counted once the server was busy: up to 4 of the streak.
  auto stub = NewStub(server->port());
  auto one_call = [&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    hilo::v1::NextRangeResponse response;
    return stub->NextRange(&context, request, &response).ok();
  };
  for (int i = 0; i < 59; ++i) ASSERT_TRUE(one_call()) << i;
  const std::set<pid_t> before_calm = Threads();
  if (batch_when_busy) {
    EXPECT_THAT(NotUnder(before, SCHED_BATCH), IsEmpty());
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(one_call()) << i;
  EXPECT_THAT(NotUnder(before_calm, SCHED_OTHER), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(BatchWhenBusy, BusySchedulingServerTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("On")
                                             : std::string("Off");
                         });

}  // namespace
}  // namespace hilo
