// A server in process with options.coalesce_replies (hilo_server's
// --coalesce_replies) and without: 20 NextRange calls on one connection,
// held at the store's commit so that they complete in batches, get 20
// ranges that are exactly 1..640 either way; with it, a batch's replies to
// that one connection corked its socket (once per batch of two or more),
// and without it nothing was corked. The coalescer's own rules:
// reply_coalescer_test.cc.
#include <algorithm>
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

TEST_P(ReplyCoalescerServerTest, ABatchsRepliesToOneConnectionLeaveTogether) {
  const bool coalesce = GetParam();
  TempDir dir;
  Notification release;
  ServerOptions options = TestServerOptions(dir);
  options.coalesce_replies = coalesce;
  options.before_commit_for_testing = [&release] {
    return release.WaitForNotificationWithTimeout(absl::Seconds(60))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("the test never let it commit");
  };
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->port());  // one channel: one connection

  constexpr int kCalls = 20;
  std::vector<hilo::v1::NextRangeResponse> responses(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> callers;
  absl::Cleanup join = [&] {
    release.Notify();
    for (std::thread& caller : callers) caller.join();
  };
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      hilo::v1::NextRangeRequest request;
      request.set_collection("orders");
      statuses[i] = stub->NextRange(&context, request, &responses[i]);
    });
  }
  // Every call is in the services: the first batch holds at its commit and
  // the rest wait for the next; bounded.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server->calls_in_services() < kCalls && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(server->calls_in_services(), kCalls);
  EXPECT_EQ(server->replies_corked(), 0);
  std::move(join).Invoke();

  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    ranges.emplace_back(responses[i].low(), responses[i].high());
  }
  std::sort(ranges.begin(), ranges.end());
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(ranges[i],
              std::make_pair(int64_t{32} * i + 1, int64_t{32} * (i + 1)));
  }
  // The held batch and the one after it: at least the second has two or
  // more calls, all on this connection; one cork per such batch.
  if (coalesce) {
    EXPECT_GE(server->replies_corked(), 1);
    EXPECT_LE(server->replies_corked(), 2);
  } else {
    EXPECT_EQ(server->replies_corked(), 0);
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
