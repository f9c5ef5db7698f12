// BusyScheduling: which policy the thread serving a call ends up under, for
// the calls in flight it is told about; threads it must leave alone; a
// refusal by the kernel; and a server that uses it. Each scenario runs on
// threads of its own (the policy, and what BusyScheduling knows of it,
// belong to the thread), so the test's main thread keeps the policy it was
// started under.
#include "service/rpc/busy_scheduling.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "testing/process_threads.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::NewStub;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StartServer;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::TestServerOptions;
using ::hilo::testing_util::ThreadPolicies;

// Runs `body` on a new thread that starts under `policy`, and waits for it.
template <typename Body>
void OnThreadUnder(int policy, Body body) {
  std::thread([&] {
    sched_param param{};
    ASSERT_EQ(sched_setscheduler(0, policy, &param), 0);
    body();
  }).join();
}

// The calling thread's policy after it served a call with `in_flight`
// calls in flight.
int PolicyAfterServing(BusyScheduling& busy, int64_t in_flight) {
  busy.Serving(in_flight);
  return sched_getscheduler(0);
}

TEST(BusySchedulingTest, ACalmServerLeavesItsThreadUnderTheDefault) {
  BusyScheduling busy({.busy_from = 16, .calm_at = 4});
  OnThreadUnder(SCHED_OTHER, [&] {
    EXPECT_EQ(PolicyAfterServing(busy, 1), SCHED_OTHER);
    EXPECT_EQ(PolicyAfterServing(busy, 15), SCHED_OTHER);
    EXPECT_FALSE(busy.busy());
  });
}

TEST(BusySchedulingTest, FromBusyFromItsThreadStopsPreemptingUntilCalm) {
  BusyScheduling busy({.busy_from = 16, .calm_at = 4});
  OnThreadUnder(SCHED_OTHER, [&] {
    EXPECT_EQ(PolicyAfterServing(busy, 16), SCHED_BATCH);
    EXPECT_TRUE(busy.busy());
    // Between the two thresholds the server stays busy...
    EXPECT_EQ(PolicyAfterServing(busy, 15), SCHED_BATCH);
    EXPECT_EQ(PolicyAfterServing(busy, 5), SCHED_BATCH);
    // ...until it is calm.
    EXPECT_EQ(PolicyAfterServing(busy, 4), SCHED_OTHER);
    EXPECT_FALSE(busy.busy());
    EXPECT_EQ(PolicyAfterServing(busy, 15), SCHED_OTHER);
  });
  EXPECT_EQ(busy.refusals(), 0);
}

// The load is the server's, not the thread's: a thread that serves its
// first call while the server is busy stops preempting at once, and a
// thread moved while busy comes back at its first call once it is calm.
TEST(BusySchedulingTest, EveryServingThreadFollowsTheServersLoad) {
  BusyScheduling busy({.busy_from = 16, .calm_at = 4});
  OnThreadUnder(SCHED_OTHER, [&] {
    EXPECT_EQ(PolicyAfterServing(busy, 40), SCHED_BATCH);
    OnThreadUnder(SCHED_OTHER, [&] {
      EXPECT_EQ(PolicyAfterServing(busy, 10), SCHED_BATCH);
      EXPECT_EQ(PolicyAfterServing(busy, 2), SCHED_OTHER);
    });
    EXPECT_EQ(PolicyAfterServing(busy, 10), SCHED_OTHER);
  });
}

// What the operator chose (chrt, systemd's CPUSchedulingPolicy=) is kept:
// a thread first seen under another policy is never moved, busy or calm.
TEST(BusySchedulingTest, AThreadStartedUnderAnotherPolicyIsLeftAlone) {
  BusyScheduling busy({.busy_from = 16, .calm_at = 4});
  OnThreadUnder(SCHED_BATCH, [&] {
    EXPECT_EQ(PolicyAfterServing(busy, 1), SCHED_BATCH);
    EXPECT_EQ(PolicyAfterServing(busy, 100), SCHED_BATCH);
    EXPECT_EQ(PolicyAfterServing(busy, 1), SCHED_BATCH);
  });
  OnThreadUnder(SCHED_IDLE, [&] {
    EXPECT_EQ(PolicyAfterServing(busy, 100), SCHED_IDLE);
    EXPECT_EQ(PolicyAfterServing(busy, 1), SCHED_IDLE);
  });
  EXPECT_EQ(busy.refusals(), 0);
}

// Makes sched_setscheduler fail with EPERM on the calling thread (and any
// it starts): a seccomp filter, as a service manager's system call filter
// would. Other threads are untouched.
void RefuseSchedSetschedulerOnThisThread() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setscheduler, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  ASSERT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
  ASSERT_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program), 0);
}

// A refused move is counted once, leaves the thread as it was, and is not
// tried again on that thread; other threads still move.
TEST(BusySchedulingTest, AThreadTheKernelRefusesToMoveStaysAndIsCountedOnce) {
  BusyScheduling busy({.busy_from = 16, .calm_at = 4});
  OnThreadUnder(SCHED_OTHER, [&] {
    RefuseSchedSetschedulerOnThisThread();
    sched_param param{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_BATCH, &param), -1);
    EXPECT_EQ(PolicyAfterServing(busy, 20), SCHED_OTHER);
    EXPECT_EQ(busy.refusals(), 1);
    EXPECT_EQ(PolicyAfterServing(busy, 20), SCHED_OTHER);
    EXPECT_EQ(busy.refusals(), 1);
  });
  OnThreadUnder(SCHED_OTHER,
                [&] { EXPECT_EQ(PolicyAfterServing(busy, 20), SCHED_BATCH); });
  EXPECT_EQ(busy.refusals(), 1);
}

// How many threads of this process are under `policy`.
int ThreadsUnder(int policy) {
  int n = 0;
  for (const auto& [tid, p] : ThreadPolicies(getpid())) n += p == policy;
  return n;
}

// A server holds 20 NextRange calls in flight (its store's commit waits),
// which is busy by BusyScheduling's defaults; with batch_when_busy (the
// parameter) the threads that served the calls past the 16th are under
// SCHED_BATCH, without it no thread is. Either way every call then gets
// its own range of the 20 first.
class BusySchedulingServerTest : public ::testing::TestWithParam<bool> {};

TEST_P(BusySchedulingServerTest, ThreadsServingABusyServerStopPreempting) {
  const bool batch_when_busy = GetParam();
  // The server's threads start under this thread's policy.
  const int own_policy = sched_getscheduler(0);
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &param), 0);
  TempDir dir;
  Notification release;
  ServerOptions options = TestServerOptions(dir);
  options.batch_when_busy = batch_when_busy;
  options.before_commit_for_testing = [&release] {
    return release.WaitForNotificationWithTimeout(absl::Seconds(60))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("the test never let it commit");
  };
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_EQ(sched_setscheduler(0, own_policy, &param), 0);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(ThreadsUnder(SCHED_BATCH), 0);

  constexpr int kCalls = 20;
  std::vector<hilo::v1::NextRangeResponse> responses(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      hilo::v1::NextRangeRequest request;
      request.set_collection("orders");
      statuses[i] =
          NewStub(server->port())->NextRange(&context, request, &responses[i]);
    });
  }
  // Every call is in the services, held by the commit; bounded.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server->calls_in_services() < kCalls && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(server->calls_in_services(), kCalls);
  if (batch_when_busy) {
    EXPECT_GE(ThreadsUnder(SCHED_BATCH), 1);
  } else {
    EXPECT_EQ(ThreadsUnder(SCHED_BATCH), 0);
  }

  release.Notify();
  for (std::thread& caller : callers) caller.join();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    ranges.emplace_back(responses[i].low(), responses[i].high());
  }
  // 20 ranges of 32, together exactly 1..640.
  std::sort(ranges.begin(), ranges.end());
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(ranges[i],
              std::make_pair(int64_t{32} * i + 1, int64_t{32} * (i + 1)));
  }
}

INSTANTIATE_TEST_SUITE_P(BatchWhenBusy, BusySchedulingServerTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("On")
                                             : std::string("Off");
                         });

}  // namespace
}  // namespace hilo
