// The C++ client's returns: tails and prefetched ranges handed back to the
// node that issued them, refused and lost replies, pairs kept whole.
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

using ::hilo::internal::IssuedRange;
using ::hilo::internal::ReturnResult;
using ::hilo::testing_util::FakeNode;
using ::hilo::testing_util::FakeSource;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kT0;
using ::hilo::testing_util::MakeClient;
using ::hilo::testing_util::Previous;
using ::hilo::testing_util::StubbedNode;
using ::hilo::testing_util::TestClient;
using ::testing::Return;

// A client of nodes A and B that used 1-7 of A's 1-32 and holds B's 33-64,
// fetched ahead.
void UseSevenOfAWithBAhead(const std::shared_ptr<FakeNode>& a,
                           const std::shared_ptr<FakeNode>& b, TestClient& t) {
  t = MakeClient(std::make_unique<FakeSource>(
                     std::vector<std::shared_ptr<FakeNode>>{a, b}),
                 '/', 0.2);
  for (int i = 1; i <= 7; ++i) {
    ASSERT_EQ(t.client->NextId("o")->number, i);  // 1-32 from A
    t.scheduler->RunAll();                        // 33-64 from B, ahead
  }
}

// The current range and the one fetched ahead came from different nodes:
// a refusal of the second must not keep the first's tail from going back.
TEST(ClientReturnTest, RangesOfTwoNodesGoBackEachOnItsOwn) {
  auto a = std::make_shared<FakeNode>("A", 32);
  auto b = std::make_shared<FakeNode>("B", 32);
  TestClient t;
  ASSERT_NO_FATAL_FAILURE(UseSevenOfAWithBAhead(a, b, t));
  // Another client of B takes the range after ours: B refuses ours now.
  TestClient other = MakeClient(
      std::make_unique<FakeSource>(std::vector<std::shared_ptr<FakeNode>>{b}));
  EXPECT_EQ(other.client->NextId("o")->number, 65);
  t.client->ReturnUnusedRanges();
  const std::vector<FakeSource::ReturnCall> returns = t.source->returns();
  ASSERT_EQ(returns.size(), 2u);
  EXPECT_EQ(returns[0].tag, "B");
  EXPECT_FALSE(returns[0].applied);
  EXPECT_EQ(returns[1].tag, "A");
  EXPECT_TRUE(returns[1].applied);
  EXPECT_EQ(a->Max("o"), 7);
  EXPECT_EQ(b->Max("o"), 96);
}

// After a hand-back the echo counts only the numbers used of the node that
// issued the range fetched last (CONTRACT.md R4): 1-7 of A are not B's, and
// reporting 7 to B would make B skip numbers once its Max is below 7.
TEST(ClientReturnTest, EchoAfterAHandBackCountsOnlyThatNodesNumbers) {
  auto a = std::make_shared<FakeNode>("A", 32);
  auto b = std::make_shared<FakeNode>("B", 32);
  TestClient t;
  ASSERT_NO_FATAL_FAILURE(UseSevenOfAWithBAhead(a, b, t));
  t.client->ReturnUnusedRanges();
  const std::vector<FakeSource::ReturnCall> returns = t.source->returns();
  ASSERT_EQ(returns.size(), 2u);
  EXPECT_EQ(returns[0].tag, "B");
  EXPECT_TRUE(returns[0].applied);
  EXPECT_TRUE(returns[1].applied);
  ASSERT_THAT(t.client->NextId("o"), IsOk());
  EXPECT_EQ(t.source->previous().back().size, 32);  // B's 33-64
  EXPECT_EQ(t.source->previous().back().max, 0);    // none of B's used
}

// A range fetched ahead above another client's range goes back whole and
// gives that client its token back; when it then hands back its own tail,
// the first client must not skip those numbers by reporting the high of
// the range it no longer holds.
TEST(ClientReturnTest, NextRangeStartsAboveTheLastNumberUsedNotAboveReturns) {
  auto node = std::make_shared<FakeNode>("A", 32);
  const std::vector<std::shared_ptr<FakeNode>> nodes = {node};
  TestClient x = MakeClient(std::make_unique<FakeSource>(nodes), '/', 0.2);
  TestClient y = MakeClient(std::make_unique<FakeSource>(nodes));
  EXPECT_EQ(x.client->NextId("o")->number, 1);   // x holds 1-32
  EXPECT_EQ(y.client->NextId("o")->number, 33);  // y holds 33-64
  for (int i = 2; i <= 7; ++i) {
    ASSERT_EQ(x.client->NextId("o")->number, i);
    x.scheduler->RunAll();  // 65-96 fetched ahead, right above y's range
  }
  x.client->ReturnUnusedRanges();  // 65-96 back whole: 33-64 is last again
  EXPECT_EQ(node->Max("o"), 64);
  y.client->ReturnUnusedRanges();  // y used 33 only
  EXPECT_EQ(node->Max("o"), 33);
  EXPECT_EQ(x.client->NextId("o")->number, 34);  // nothing skipped
  EXPECT_EQ(x.source->previous().back().max, 7);
}

TEST(ClientReturnTest, StaleReturnAfterAnotherClientTookARangeIsRefused) {
  auto node = std::make_shared<FakeNode>("A", 32);
  const std::vector<std::shared_ptr<FakeNode>> nodes = {node};
  TestClient first = MakeClient(std::make_unique<FakeSource>(nodes));
  TestClient second = MakeClient(std::make_unique<FakeSource>(nodes));
  EXPECT_EQ(first.client->NextId("o")->number, 1);    // holds 1-32
  EXPECT_EQ(second.client->NextId("o")->number, 33);  // holds 33-64
  first.client->ReturnUnusedRanges();
  const std::vector<FakeSource::ReturnCall> returns = first.source->returns();
  ASSERT_EQ(returns.size(), 1u);
  EXPECT_FALSE(returns[0].applied);
  EXPECT_EQ(returns[0].max, 64);
  EXPECT_EQ(node->Max("o"), 64);
  EXPECT_THAT(first.log->lines(), ::testing::IsEmpty());  // normal, not news
  // Nobody gets 2-32 again, and each client goes on above what it held.
  EXPECT_EQ(second.client->NextId("o")->number, 34);
  EXPECT_EQ(first.client->NextId("o")->number, 65);
  // The refused return leaves the echo as it was: 1-32's high, at or below
  // Max since nothing applied (CONTRACT.md R4).
  EXPECT_EQ(first.source->previous().back().max, 32);
}

TEST(ClientReturnTest, ReturnWithAnotherRangesTokenIsRefused) {
  for (const double prefetch_at : {0.0, 0.2}) {
    SCOPED_TRACE(prefetch_at);
    TestClient t =
        MakeClient(std::make_unique<FakeSource>(32), '/', prefetch_at);
    t.source->SendWrongTokens();
    for (int i = 0; i < 7; ++i) {
      ASSERT_THAT(t.client->NextId("o"), IsOk());
      t.scheduler->RunAll();
    }
    const int64_t max = prefetch_at > 0 ? 64 : 32;
    t.client->ReturnUnusedRanges();
    const std::vector<FakeSource::ReturnCall> returns = t.source->returns();
    // With a range fetched ahead, the pair goes back together (one call
    // where the node takes batches): each return is refused, nothing moves.
    ASSERT_EQ(returns.size(), prefetch_at > 0 ? 2u : 1u);
    for (const FakeSource::ReturnCall& r : returns) {
      EXPECT_FALSE(r.applied);
      EXPECT_EQ(r.max, max);
    }
    EXPECT_EQ(t.client->stats().returns_refused,
              static_cast<int64_t>(returns.size()));
    EXPECT_EQ(t.source->node()->Max("o"), max);
    EXPECT_EQ(t.client->NextId("o")->number, max + 1);
  }
}

TEST(ClientReturnTest, DuplicateReturnIsRefusedAndMovesNothing) {
  FakeSource source(32);
  absl::StatusOr<IssuedRange> range = source.Next("o", {});
  ASSERT_THAT(range, IsOk());
  absl::StatusOr<ReturnResult> once = source.Return("o", *range, 5);
  ASSERT_THAT(once, IsOk());
  EXPECT_TRUE(once->applied);
  // Copies, as a retry after a lost reply sends them: refused, even one
  // reaching lower.
  for (const int64_t last : {5, 3}) {
    absl::StatusOr<ReturnResult> again = source.Return("o", *range, last);
    ASSERT_THAT(again, IsOk());
    EXPECT_FALSE(again->applied) << last;
    EXPECT_EQ(again->max, 5) << last;
  }
  absl::StatusOr<IssuedRange> next = source.Next("o", Previous(32, kT0, 5));
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->low, 6);
  // A late copy after the numbers went out again takes none of them back.
  absl::StatusOr<ReturnResult> late = source.Return("o", *range, 5);
  ASSERT_THAT(late, IsOk());
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(source.node()->Max("o"), next->high);
}

// The client over GrpcRangeSource over the real service and store: the
// reply of the first return (the range fetched ahead, whole) is lost after
// the node applied it. The retried copy is refused, with Max already where
// the client wanted it, so the client goes on and hands the tail of its
// current range back too.
TEST(ClientReturnTest, LostReplyOfAnAppliedReturnIsRetriedAndTheTailFollows) {
  StubbedNode server(10);
  server.lost_replies = 1;
  std::unique_ptr<Client> client = server.MakeClientHoldingAPair();
  client->ReturnUnusedRanges();
  // The pair goes in one call, later range first; the retried copy of
  // both is refused, with Max already at the last number used.
  EXPECT_THAT(
      server.calls,
      ::testing::ElementsAre("end 20 last 10 applied, end 10 last 2 applied",
                             "end 20 last 10 refused, end 10 last 2 refused"));
  EXPECT_EQ(server.node.Max("o"), 2);
  EXPECT_THAT(server.log.lines(), ::testing::IsEmpty());
  // The refused copy of a return that applied counts as applied: the
  // numbers are back.
  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.returns_applied, 2);
  EXPECT_EQ(stats.returns_refused, 0);
  EXPECT_EQ(stats.returns_failed, 0);
  EXPECT_THAT(stats.errors, ::testing::IsEmpty());
  EXPECT_EQ(client->NextId("o")->number, 3);
}

// README "A pair of adjacent ranges": a client holding its current range
// and the next one, fetched ahead, hands back the later one whole and then
// its unused tail of the earlier one, and both apply. Another client that
// asks for a range of the collection while the first one closes must not
// come between the two (the tail would be refused and its numbers lost):
// here it asks right after the closing client's first call, and still gets
// the numbers right after the last one the closing client used.
TEST(ClientReturnTest, PairOfAdjacentRangesGoesBackWholeBeforeAnyoneCutsIn) {
  StubbedNode server(10);
  std::optional<int64_t> other_low;
  server.after_return = [&] {
    if (!other_low.has_value()) other_low = server.OtherClientTakesARange("o");
  };
  std::unique_ptr<Client> client = server.MakeClientHoldingAPair();
  client->ReturnUnusedRanges();
  EXPECT_THAT(
      server.calls,
      ::testing::ElementsAre("end 20 last 10 applied, end 10 last 2 applied"));
  ASSERT_TRUE(other_low.has_value());
  EXPECT_EQ(*other_low, 3);
  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.returns_applied, 2);
  EXPECT_EQ(stats.returns_refused, 0);
  EXPECT_EQ(stats.returns_failed, 0);
  EXPECT_THAT(server.log.lines(), ::testing::IsEmpty());
}

// To a server older than ReturnRanges the pair goes as two ReturnRange
// calls, the later range first; with nobody between them, both apply.
TEST(ClientReturnTest, PairGoesBackLaterRangeFirstToAServerWithoutBatches) {
  StubbedNode server(10, /*batches=*/false);
  std::unique_ptr<Client> client = server.MakeClientHoldingAPair();
  client->ReturnUnusedRanges();
  EXPECT_THAT(server.calls, ::testing::ElementsAre("end 20 last 10 applied",
                                                   "end 10 last 2 applied"));
  EXPECT_EQ(server.node.Max("o"), 2);
  EXPECT_EQ(server.OtherClientTakesARange("o"), 3);
  EXPECT_EQ(client->stats().returns_applied, 2);
  EXPECT_THAT(server.log.lines(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace hilo
