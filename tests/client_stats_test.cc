// The C++ client's counters (Client::Stats): fetches, waits, returns,
// failures by code, failovers.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/fork_guard.h"
#include "client_cpp/src/fork_safe_source.h"
#include "client_cpp/src/grpc_range_source.h"
#include "client_cpp/src/monotonic_clock.h"
#include "client_cpp/src/range_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"
#include "service/rpc/hilo_service.h"
#include "service/store/range_size_policy.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/client_fakes.h"
#include "testing/fake_node.h"
#include "testing/grpc_source_fakes.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::FakeNode;
using ::hilo::testing_util::FakeSource;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::LogLines;
using ::hilo::testing_util::MakeClient;
using ::hilo::testing_util::MakeMockTargets;
using ::hilo::testing_util::MockTargets;
using ::hilo::testing_util::Reply;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TestClient;
using ::testing::_;
using ::testing::Return;

TEST(ClientStatsTest, CountsFetchesWaitsAndAppliedReturns) {
  TestClient t = MakeClient(10);
  EXPECT_EQ(t.client->stats().ranges_fetched, 0);
  for (int i = 0; i < 25; ++i) ASSERT_THAT(t.client->NextId("o"), IsOk());
  ASSERT_THAT(t.client->NextId("p"), IsOk());
  t.client->ReturnUnusedRanges();  // 26-30 of "o", 2-10 of "p"
  const ClientStats stats = t.client->stats();
  EXPECT_EQ(stats.ranges_fetched, 4);  // 1-10, 11-20, 21-30; "p" 1-10
  EXPECT_EQ(stats.ranges_prefetched, 0);
  EXPECT_EQ(stats.calls_waited, 4);
  EXPECT_EQ(stats.failovers, 0);
  EXPECT_EQ(stats.returns_applied, 2);
  EXPECT_EQ(stats.returns_refused, 0);
  EXPECT_EQ(stats.returns_failed, 0);
  EXPECT_THAT(stats.errors, ::testing::IsEmpty());
}

TEST(ClientStatsTest, CountsRangesFetchedAheadApartFromWaits) {
  TestClient t = MakeClient(10, {"A"}, '/', 0.2);
  for (int i = 0; i < 2; ++i) ASSERT_THAT(t.client->NextId("o"), IsOk());
  EXPECT_EQ(t.scheduler->RunAll(), 1);  // 11-20 fetched ahead
  for (int i = 0; i < 10; ++i) ASSERT_THAT(t.client->NextId("o"), IsOk());
  EXPECT_EQ(t.scheduler->RunAll(), 1);  // 21-30 fetched ahead
  const ClientStats stats = t.client->stats();
  EXPECT_EQ(stats.ranges_fetched, 3);
  EXPECT_EQ(stats.ranges_prefetched, 2);
  EXPECT_EQ(stats.calls_waited, 1);  // only the first call
}

TEST(ClientStatsTest, CountsRefusedReturns) {
  auto node = std::make_shared<FakeNode>("A", 32);
  const std::vector<std::shared_ptr<FakeNode>> nodes = {node};
  TestClient first = MakeClient(std::make_unique<FakeSource>(nodes));
  TestClient second = MakeClient(std::make_unique<FakeSource>(nodes));
  ASSERT_THAT(first.client->NextId("o"), IsOk());   // holds 1-32
  ASSERT_THAT(second.client->NextId("o"), IsOk());  // holds 33-64
  first.client->ReturnUnusedRanges();
  const ClientStats stats = first.client->stats();
  EXPECT_EQ(stats.returns_applied, 0);
  EXPECT_EQ(stats.returns_refused, 1);
  EXPECT_EQ(stats.returns_failed, 0);
  EXPECT_THAT(stats.errors, ::testing::IsEmpty());  // normal, not an error
}

TEST(ClientStatsTest, CountsEachFailedFetchOnceByItsCode) {
  TestClient t = MakeClient(2);
  t.source->FailWith(absl::UnavailableError("no server"));
  EXPECT_THAT(t.client->NextId("o"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(t.client->NextId("o"), StatusIs(absl::StatusCode::kUnavailable));
  t.source->FailWith(absl::InvalidArgumentError("the node refuses it"));
  EXPECT_THAT(t.client->NextId("o"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  t.source->FailWith(absl::OkStatus());
  // A name the client refuses itself (CONTRACT.md R19) is no fetch.
  EXPECT_THAT(t.client->NextId(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(t.client->NextId("o"), IsOk());
  const ClientStats stats = t.client->stats();
  EXPECT_THAT(stats.errors,
              ::testing::ElementsAre(
                  ::testing::Pair(absl::StatusCode::kInvalidArgument, 1),
                  ::testing::Pair(absl::StatusCode::kUnavailable, 2)));
  EXPECT_EQ(stats.ranges_fetched, 1);
  EXPECT_EQ(stats.calls_waited, 4);
}

TEST(ClientStatsTest, RangeWithMalformedTagCountsAsInternalNotFetched) {
  TestClient t = MakeClient(32, {"a"});
  EXPECT_THAT(t.client->NextId("o"), StatusIs(absl::StatusCode::kInternal));
  const ClientStats stats = t.client->stats();
  EXPECT_EQ(stats.ranges_fetched, 0);
  EXPECT_THAT(stats.errors, ::testing::ElementsAre(::testing::Pair(
                                absl::StatusCode::kInternal, 1)));
}

TEST(ClientStatsTest, CountsAFailoverOnlyWhenAnotherTargetAnswers) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(Reply(1, 2, "B"))
      .WillOnce(Reply(3, 4, "B"))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, ReturnRange(_, _, _)).Times(0);
  ClientOptions options;
  options.prefetch_at = 0;
  std::unique_ptr<Client> client =
      NewClientForTesting(options, std::move(m.source));
  // a fails, b answers (a failover); b, now preferred, answers again.
  for (int i = 0; i < 4; ++i) ASSERT_THAT(client->NextId("o"), IsOk());
  EXPECT_EQ(client->stats().failovers, 1);
  // b fails, then a fails again (set up below): nobody answered, so no
  // failover.
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_THAT(client->NextId("o"), StatusIs(absl::StatusCode::kUnavailable));
  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.failovers, 1);
  EXPECT_EQ(stats.ranges_fetched, 2);
  EXPECT_THAT(stats.errors, ::testing::ElementsAre(::testing::Pair(
                                absl::StatusCode::kUnavailable, 1)));
}

TEST(ClientStatsTest, CountsAReturnThatFailedAfterItsRetries) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "A", /*token=*/7));
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .Times(3)
      .WillRepeatedly(
          Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  auto log = std::make_shared<LogLines>();
  ClientOptions options;
  options.prefetch_at = 0;
  options.log = [log](absl::string_view line) { log->Add(line); };
  std::unique_ptr<Client> client =
      NewClientForTesting(options, std::move(m.source));
  ASSERT_THAT(client->NextId("o"), IsOk());
  client->ReturnUnusedRanges();
  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.returns_applied, 0);
  EXPECT_EQ(stats.returns_refused, 0);
  EXPECT_EQ(stats.returns_failed, 1);
  EXPECT_THAT(stats.errors, ::testing::ElementsAre(::testing::Pair(
                                absl::StatusCode::kUnavailable, 1)));
  EXPECT_EQ(log->lines().size(), 1u);
}

}  // namespace
}  // namespace hilo
