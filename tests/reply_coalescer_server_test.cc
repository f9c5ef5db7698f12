// A server in process with options.coalesce_replies (hilo_server's
// --coalesce_replies) and without: twice 20 NextRange calls on one
// connection, held at the store's commit so that they complete in batches,
// get 40 ranges that are exactly 1..1280 either way; with it, the second
// round's batch replies corked the connection's socket (the first round's
// asked for the scan that found it). The coalescer's own rules:
// reply_coalescer_test.cc.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::NewStub;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StartServer;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::TestServerOptions;

class ReplyCoalescerServerTest : public ::testing::TestWithParam<bool> {};

// Sends `calls` NextRange("orders") calls at once on `stub`'s connection,
// holding the first batch's commit until all are in the services (so the
// rest commit together), and returns their ranges in order.
std::vector<std::pair<int64_t, int64_t>> HeldRound(Server& server,
                                                   hilo::v1::HiLo::Stub& stub,
                                                   Notification& release,
                                                   int calls) {
  std::vector<hilo::v1::NextRangeResponse> responses(calls);
  std::vector<grpc::Status> statuses(calls);
  std::vector<std::thread> callers;
  absl::Cleanup join = [&] {
    release.Notify();
    for (std::thread& caller : callers) caller.join();
  };
  for (int i = 0; i < calls; ++i) {
    callers.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      hilo::v1::NextRangeRequest request;
      request.set_collection("orders");
      statuses[i] = stub.NextRange(&context, request, &responses[i]);
    });
  }
  // Bounded: every call is in the services, the first batch holding.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server.calls_in_services() < calls && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(server.calls_in_services(), calls);
  std::move(join).Invoke();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int i = 0; i < calls; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    ranges.emplace_back(responses[i].low(), responses[i].high());
  }
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST_P(ReplyCoalescerServerTest, ABatchsRepliesToOneConnectionLeaveTogether) {
  const bool coalesce = GetParam();
  TempDir dir;
  // One per round; the first round's is notified before the second starts.
  Notification releases[2];
  std::atomic<int> round{0};
  ServerOptions options = TestServerOptions(dir);
  options.coalesce_replies = coalesce;
  options.before_commit_for_testing = [&releases, &round] {
    return releases[round.load()].WaitForNotificationWithTimeout(
               absl::Seconds(60))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("the test never let it commit");
  };
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->port());  // one channel: one connection

  constexpr int kCalls = 20;
  std::vector<std::pair<int64_t, int64_t>> ranges =
      HeldRound(*server, *stub, releases[0], kCalls);
  if (coalesce) {
    // The first round's batch of two or more missed the connection's
    // socket and asked for a scan, which runs on the coalescer's thread.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (server->reply_counts().scans == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GE(server->reply_counts().scans, 1);
  }
  round = 1;
  const int64_t corked_after_first = server->reply_counts().corked;
  for (const auto& range : HeldRound(*server, *stub, releases[1], kCalls)) {
    ranges.push_back(range);
  }
  ASSERT_EQ(ranges.size(), 2 * kCalls);
  for (int i = 0; i < 2 * kCalls; ++i) {
    EXPECT_EQ(ranges[i],
              std::make_pair(int64_t{32} * i + 1, int64_t{32} * (i + 1)));
  }
  // Off, the same ranges, and no coalescer to count anything.
  if (coalesce) {
    EXPECT_GT(server->reply_counts().corked, corked_after_first);
  }
}

INSTANTIATE_TEST_SUITE_P(CoalesceReplies, ReplyCoalescerServerTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("On")
                                             : std::string("Off");
                         });

}  // namespace
}  // namespace hilo
