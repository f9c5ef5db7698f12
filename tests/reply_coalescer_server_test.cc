// A server in process with options.coalesce_replies (hilo_server's
// --coalesce_replies) and without: twice 20 NextRange calls on one
// connection, held at the store's commit so that they complete in batches,
// get 40 ranges that are exactly 1..1280 either way; with it, the second
// round's batch replies corked the connection's socket (the first round's
// asked for the scan that found it). The coalescer's own rules:
// reply_coalescer_test.cc.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "testing/held_calls.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::HeldNextRanges;
using ::hilo::testing_util::HoldCommitsUntil;
using ::hilo::testing_util::NewStub;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StartServer;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::TestServerOptions;

class ReplyCoalescerServerTest : public ::testing::TestWithParam<bool> {};

TEST_P(ReplyCoalescerServerTest, ABatchsRepliesToOneConnectionLeaveTogether) {
  const bool coalesce = GetParam();
  TempDir dir;
  // One per round; the first round's is notified before the second starts.
  Notification releases[2];
  std::atomic<int> round{0};
  ServerOptions options = TestServerOptions(dir);
  options.coalesce_replies = coalesce;
  options.before_commit_for_testing = [&releases, &round] {
    return HoldCommitsUntil(releases[round.load()])();
  };
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->port());  // one channel: one connection

  constexpr int kCalls = 20;
  // Both rounds on `stub`'s connection.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  {
    HeldNextRanges held(*server, releases[0], kCalls, stub.get());
    ASSERT_TRUE(held.AllInServices());
    ranges = held.Release();
  }
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
  {
    HeldNextRanges held(*server, releases[1], kCalls, stub.get());
    ASSERT_TRUE(held.AllInServices());
    for (const auto& range : held.Release()) ranges.push_back(range);
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
