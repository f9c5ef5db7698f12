// RangeCache: its generation counter, the marks a client reports after
// returns; and node tags as the cache keeps them.
#include "client_cpp/src/range_cache.h"

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

using ::hilo::testing_util::FakeSource;
using ::hilo::testing_util::FinishesWithin;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::MakeClient;
using ::hilo::testing_util::MakeMockTargets;
using ::hilo::testing_util::ManualMonotonicClock;
using ::hilo::testing_util::MockTargets;
using ::hilo::testing_util::Reply;
using ::hilo::testing_util::Returned;
using ::hilo::testing_util::TestClient;
using ::testing::_;

TEST(NodeTagTest, HoldsUpToFourCharactersAndComparesAsText) {
  constexpr NodeTag kEmpty;
  EXPECT_TRUE(kEmpty.empty());
  EXPECT_EQ(kEmpty.view(), "");
  const NodeTag b7("B7");
  EXPECT_EQ(b7.size(), 2u);
  EXPECT_EQ(b7.view(), "B7");
  EXPECT_EQ(std::string(b7), "B7");
  EXPECT_TRUE(b7 == "B7");
  EXPECT_TRUE("B7" == b7);
  EXPECT_TRUE(b7 == std::string("B7"));
  EXPECT_FALSE(b7 == "B");
  EXPECT_FALSE(b7 == "B77");
  EXPECT_TRUE(b7 == NodeTag("B7"));
  EXPECT_FALSE(b7 == NodeTag("B8"));
  EXPECT_TRUE(NodeTag("B") < b7);
  EXPECT_TRUE(b7 < NodeTag("C"));
  EXPECT_EQ(NodeTag("ABCDE").view(), "ABCD");  // the first four
  std::ostringstream os;
  os << NodeTag("Q9");
  EXPECT_EQ(os.str(), "Q9");
}

// The range cache packs a tag into 32 bits with NUL padding; each length
// and the characters at both ends must come back as they went in.
TEST(NodeTagTest, EveryTagLengthSurvivesTheRangeCache) {
  for (const std::string tag : {"A", "Z9", "0AZ", "9ZZ0"}) {
    TestClient t = MakeClient(4, {tag});
    absl::StatusOr<Id> id = t.client->NextId("o");
    ASSERT_THAT(id, IsOk());
    EXPECT_EQ(id->node_tag, tag);
    EXPECT_EQ(id->node_tag.size(), tag.size());
  }
}

TEST(RangeCacheTest, GenerationWrapsAtItsPackedWidthWithoutSpinning) {
  using internal::RangeCache;
  // One-number ranges: every Next publishes a new generation.
  auto source = std::make_shared<FakeSource>(1);
  auto cache =
      std::make_shared<RangeCache>("o", source.get(), [](absl::string_view) {});
  cache->StartAtGenerationForTesting(RangeCache::kGenerationMask - 3);
  constexpr int kDraws = 8;  // generations 2^24 - 3 ... 2^24 + 4
  auto got = std::make_shared<std::vector<absl::StatusOr<Id>>>();
  const bool finished = FinishesWithin(absl::Seconds(20), [source, cache, got] {
    for (int i = 0; i < kDraws; ++i) got->push_back(cache->Next());
  });
  ASSERT_TRUE(finished) << "Next() did not return within 20 s: it spins at "
                           "the generation wrap";
  ASSERT_EQ(got->size(), size_t{kDraws});
  for (int i = 0; i < kDraws; ++i) {
    ASSERT_THAT((*got)[i], IsOk());
    EXPECT_EQ((*got)[i]->number, i + 1);
    EXPECT_EQ((*got)[i]->node_tag, "A");
  }
  EXPECT_EQ(source->calls(), kDraws);  // one fetch per range, none lost
}

// A RangeCache of "o" (prefetch at a fifth) whose prefetch tasks wait in
// `tasks` until the test runs them.
struct HeldPrefetchCache {
  explicit HeldPrefetchCache(internal::RangeSource* source)
      : cache(
            "o", source, [](absl::string_view) {}, /*prefetch_at=*/0.2,
            [this](std::function<void()> task) {
              tasks.push_back(std::move(task));
            }) {}

  std::vector<std::function<void()>> tasks;
  internal::RangeCache cache;
};

// A pair (33-96 fetched ahead, 1-32 with 10 used) goes back in order, and
// the marks follow: 96, then 32, then 10; the node's next range is 11-.
TEST(RangeCacheTest, AfterAPairIsBackTheNextRangeMayStartAfterTheLastUsed) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "A", 7))
      .WillOnce(Reply(33, 96, "A", 8))
      .WillOnce(Reply(11, 138, "A", 9));
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce(Returned(/*applied=*/true, 32))
      .WillOnce(Returned(/*applied=*/true, 10));
  HeldPrefetchCache held(m.source.get());
  internal::RangeCache& cache = held.cache;
  for (int64_t n = 1; n <= 10; ++n) ASSERT_EQ(cache.Next()->number, n);
  ASSERT_EQ(held.tasks.size(), 1u);
  held.tasks[0]();  // 33-96 ahead
  cache.ReturnUnused();
  absl::StatusOr<Id> next = cache.Next();
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->number, 11);
}

// A range handed back whole puts the mark back where it was before the
// range was taken, not at its low - 1: another client's return may since
// have moved the node's Max below that (here 33-64's holder handed back
// 41-64 after this client returned 65-96), and the node's next range, 41-,
// holds no number this client handed out.
TEST(RangeCacheTest, AfterAWholeReturnTheMarkIsWhatItWasBeforeTheRange) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "A", 7))
      .WillOnce(Reply(65, 96, "A", 8))
      .WillOnce(Reply(41, 72, "A", 9));
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce(Returned(/*applied=*/true, 64));
  HeldPrefetchCache held(m.source.get());
  internal::RangeCache& cache = held.cache;
  for (int64_t n = 1; n <= 10; ++n) ASSERT_EQ(cache.Next()->number, n);
  ASSERT_EQ(held.tasks.size(), 1u);
  held.tasks[0]();  // 65-96 ahead (another client holds 33-64)
  for (int64_t n = 11; n <= 32; ++n) ASSERT_EQ(cache.Next()->number, n);
  cache.ReturnUnused();  // 65-96 back whole
  absl::StatusOr<Id> next = cache.Next();
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->number, 41);
}

// The runway (ClientStats::runway): what the cache holds, at the rate it
// handed numbers out since the range before the current one came.
TEST(RangeCacheTest, RunwayIsTheNumbersHeldAtTheRecentRate) {
  FakeSource source(32);
  ManualMonotonicClock clock;
  std::vector<std::function<void()>> tasks;
  internal::RangeCache cache(
      "o", &source, [](absl::string_view) {}, /*prefetch_at=*/0.2,
      [&](std::function<void()> task) { tasks.push_back(std::move(task)); },
      &clock);
  const auto runway = [&]() -> std::optional<double> {
    ClientStats stats;
    cache.AddStatsTo(&stats);
    const auto it = stats.runway.find("o");
    if (it == stats.runway.end()) return std::nullopt;
    return absl::ToDoubleSeconds(it->second);
  };
  EXPECT_EQ(runway(), std::nullopt);  // nothing held
  ASSERT_EQ(cache.Next()->number, 1);
  EXPECT_EQ(runway(), std::nullopt);  // no time passed
  clock.Advance(absl::Seconds(1));
  EXPECT_NEAR(*runway(), 31.0, 1e-6);  // 31 held at 1 a second
  for (int64_t n = 2; n <= 10; ++n) ASSERT_EQ(cache.Next()->number, n);
  EXPECT_NEAR(*runway(), 2.2, 1e-6);  // 22 at 10 a second
  ASSERT_EQ(tasks.size(), 1u);        // the 7th number asked for 33-64
  tasks[0]();
  EXPECT_NEAR(*runway(), 5.4, 1e-6);  // 22 + 32 at 10 a second
  clock.Advance(absl::Seconds(1));
  for (int64_t n = 11; n <= 33; ++n) ASSERT_EQ(cache.Next()->number, n);
  // 33-64 took over; the window began with 1-32: 33 numbers in 2 s.
  EXPECT_NEAR(*runway(), 31.0 * 2 / 33, 1e-6);
  clock.Advance(absl::Seconds(2));
  // No number for 2 s: the rate falls to 33 in 4 s.
  EXPECT_NEAR(*runway(), 31.0 * 4 / 33, 1e-6);
  cache.ReturnUnused();
  EXPECT_EQ(runway(), std::nullopt);  // nothing held
}

}  // namespace
}  // namespace hilo
