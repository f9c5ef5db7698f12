// BusyScheduling: when the server turns busy and calm again, for the calls
// in flight each call finds and the time between them (a hand-moved
// clock), including a busy load whose calls in flight dip between commits
// and calls racing on several threads. A server that moves its threads
// with it: busy_scheduling_server_test.cc.
#include "service/rpc/busy_scheduling.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"

namespace hilo {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A BusyScheduling on a hand-moved clock whose changes are recorded, in
// order.
struct Recorded {
  explicit Recorded(BusyScheduling::Options options)
      : busy(options, &clock, [this](bool b) { changes.push_back(b); }) {}
  ManualClock clock{absl::FromUnixSeconds(1'000'000)};
  std::vector<bool> changes;  // written under BusyScheduling's lock
  BusyScheduling busy;
};

constexpr BusyScheduling::Options kOptions{.busy_from = 16,
                                           .calm_at = 4,
                                           .calm_calls = 3,
                                           .calm_after = absl::Seconds(1)};

TEST(BusySchedulingTest, StaysCalmBelowBusyFrom) {
  Recorded r(kOptions);
  for (int64_t in_flight : {1, 4, 5, 15, 15, 1}) r.busy.Serving(in_flight);
  EXPECT_FALSE(r.busy.busy());
  EXPECT_THAT(r.changes, IsEmpty());
}

TEST(BusySchedulingTest, TurnsBusyOnceAtBusyFrom) {
  Recorded r(kOptions);
  r.busy.Serving(16);
  EXPECT_TRUE(r.busy.busy());
  for (int64_t in_flight : {40, 16, 100, 5}) r.busy.Serving(in_flight);
  EXPECT_TRUE(r.busy.busy());
  EXPECT_THAT(r.changes, ElementsAre(true));
}

// Calm needs calm_calls calls in a row at or below calm_at: one above it
// (between the thresholds or past busy_from) starts the count again.
TEST(BusySchedulingTest, TurnsCalmAfterCalmCallsInARowAtOrBelowCalmAt) {
  Recorded r(kOptions);
  r.busy.Serving(20);
  for (int64_t in_flight : {4, 1, 5, 3, 2, 16, 4, 4}) {
    r.busy.Serving(in_flight);
    EXPECT_TRUE(r.busy.busy()) << in_flight;
  }
  r.busy.Serving(4);
  EXPECT_FALSE(r.busy.busy());
  EXPECT_THAT(r.changes, ElementsAre(true, false));
  // And busy again, from a fresh count.
  r.busy.Serving(16);
  r.busy.Serving(1);
  r.busy.Serving(1);
  EXPECT_TRUE(r.busy.busy());
  EXPECT_THAT(r.changes, ElementsAre(true, false, true));
}

// Calm also comes at the first call that finds few in flight once no call
// has found more for calm_after, however short the streak.
TEST(BusySchedulingTest, TurnsCalmAtTheFirstFewCallAfterAQuietSpell) {
  Recorded r(kOptions);
  r.busy.Serving(20);
  r.clock.Advance(absl::Milliseconds(999));
  r.busy.Serving(4);  // a streak of 1, 999 ms after the last loaded call
  r.busy.Serving(5);  // loaded: the quiet spell starts again
  r.clock.Advance(absl::Milliseconds(999));
  r.busy.Serving(1);
  EXPECT_TRUE(r.busy.busy());
  r.clock.Advance(absl::Milliseconds(1));
  r.busy.Serving(1);
  EXPECT_FALSE(r.busy.busy());
  EXPECT_THAT(r.changes, ElementsAre(true, false));
}

// A server at 64 in flight whose count falls to a few calls as each group
// commit answers its batch stays busy: the defaults need 64 such calls in
// a row, or 100 ms without a loaded call, and a batch's worth of calls
// above 4 comes between the dips (here 10 µs apart, 64 calls a batch).
TEST(BusySchedulingTest, ABusyServerWhoseCallsDipBetweenCommitsStaysBusy) {
  Recorded r(BusyScheduling::Options{});
  for (int batch = 0; batch < 1000; ++batch) {
    for (int64_t in_flight = 1; in_flight <= 64; ++in_flight) {
      r.busy.Serving(in_flight <= 4 ? in_flight : 64 - in_flight + 5);
      r.clock.Advance(absl::Microseconds(10));
    }
  }
  EXPECT_THAT(r.changes, ElementsAre(true));
  for (int i = 0; i < 63; ++i) r.busy.Serving(1);
  EXPECT_TRUE(r.busy.busy());
  r.busy.Serving(1);
  EXPECT_THAT(r.changes, ElementsAre(true, false));
}

// Calls on several threads turn it busy and calm many times over: the
// owner never hears the same state twice in a row and ends with the state
// the calls last set.
TEST(BusySchedulingTest, RacingCallsLeaveTheOwnerWithTheLastState) {
  Recorded r(
      BusyScheduling::Options{.busy_from = 3, .calm_at = 1, .calm_calls = 2});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 20000; ++i) r.busy.Serving((i + t) % 4);
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_FALSE(r.changes.empty());
  for (size_t i = 0; i < r.changes.size(); ++i) {
    ASSERT_EQ(r.changes[i], i % 2 == 0) << i;  // true, false, true, ...
  }
  EXPECT_EQ(r.changes.back(), r.busy.busy());
  for (int i = 0; i < 2; ++i) r.busy.Serving(0);
  EXPECT_FALSE(r.busy.busy());
  EXPECT_FALSE(r.changes.back());
}

}  // namespace
}  // namespace hilo
