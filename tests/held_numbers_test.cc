// The interval summary of CONTRACT.md R11 (client_cpp/src/held_numbers.h):
// exact intervals after adds and removals, the merge of the closest pair,
// and a range refused exactly when it overlaps, at each edge.
#include "client_cpp/src/held_numbers.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hilo::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Spans = std::vector<HeldInterval>;

constexpr int64_t kTop = std::numeric_limits<int64_t>::max();

TEST(HeldNumbersTest, TouchingRangesBecomeOneInterval) {
  EXPECT_EQ(AddInterval(AddInterval({}, 1, 32), 33, 96), Spans({{1, 96}}));
}

TEST(HeldNumbersTest, FourIntervalsAreKeptApart) {
  Spans spans;
  for (const int64_t low : {int64_t{1}, int64_t{101}, int64_t{1001}}) {
    spans = AddInterval(spans, low, low + 9);
  }
  spans = AddInterval(spans, kTop, kTop);
  EXPECT_EQ(spans, Spans({{1, 10}, {101, 110}, {1001, 1010}, {kTop, kTop}}));
}

TEST(HeldNumbersTest, AFifthMergesTheTwoWithTheSmallestGap) {
  const Spans four = {{1, 10}, {101, 110}, {1001, 1010}, {kTop, kTop}};
  // 120-130: gap 10 after 101-110, the smallest.
  EXPECT_EQ(AddInterval(four, 120, 130),
            Spans({{1, 10}, {101, 130}, {1001, 1010}, {kTop, kTop}}));
  // 50-60: gaps 40 (from 10) and 41 (to 101): joins 1-10.
  EXPECT_EQ(AddInterval(four, 50, 60),
            Spans({{1, 60}, {101, 110}, {1001, 1010}, {kTop, kTop}}));
}

TEST(HeldNumbersTest, ATieMergesTheLowestPair) {
  EXPECT_EQ(AddInterval({{1, 1}, {11, 11}, {21, 21}, {31, 31}}, 41, 41),
            Spans({{1, 11}, {21, 21}, {31, 31}, {41, 41}}));
}

// The two highest hold the ranges in use: never merged, even when their
// gap is the smallest.
TEST(HeldNumbersTest, TheTwoHighestAreNeverMerged) {
  EXPECT_EQ(AddInterval({{1, 10}, {1001, 1010}, {2001, 2010}, {3001, 3010}},
                        3020, 3030),
            Spans({{1, 1010}, {2001, 2010}, {3001, 3010}, {3020, 3030}}));
}

// faults.stress_short's case: had 301-310 and 321-400 (the current range)
// become one, handing 321-400 back would leave 301-320, and the node's
// next range, 311 on once the owner of 311-320 handed it back, refused.
TEST(HeldNumbersTest, AGapAtTheTopIsNeverCovered) {
  HeldNumbers held;
  for (const auto& [low, high] :
       Spans({{1, 10}, {101, 110}, {201, 210}, {301, 310}, {321, 400}})) {
    held.Add("A", low, high);
  }
  held.Remove("A", 321, 400);
  EXPECT_EQ(held.Intervals("A"), Spans({{1, 110}, {201, 210}, {301, 310}}));
  EXPECT_TRUE(held.Check("A", 311, 374).ok());
}

TEST(HeldNumbersTest, RemoveTakesATailAWholeOrAMiddle) {
  EXPECT_EQ(RemoveInterval({{1, 96}}, 41, 96), Spans({{1, 40}}));
  EXPECT_EQ(RemoveInterval({{1, 96}}, 33, 96), Spans({{1, 32}}));
  EXPECT_THAT(RemoveInterval({{1, 96}}, 1, 96), IsEmpty());
  EXPECT_EQ(RemoveInterval({{1, 96}}, 40, 50), Spans({{1, 39}, {51, 96}}));
  EXPECT_EQ(RemoveInterval({{5, kTop}}, 6, kTop), Spans({{5, 5}}));
}

TEST(HeldNumbersTest, ASplitPastFourMergesAgain) {
  // 1-100 less 50-99 is 1-49 and 100-100: five, and the smallest gap is
  // 49 to 100 (51; 100 to 201 is 101), so they join again.
  EXPECT_EQ(
      RemoveInterval({{1, 100}, {201, 210}, {301, 310}, {1001, 1010}}, 50, 99),
      Spans({{1, 100}, {201, 210}, {301, 310}, {1001, 1010}}));
}

TEST(HeldNumbersTest, RefusedExactlyWhenOverlappingAtEachEdge) {
  HeldNumbers held;
  held.Add("A", 33, 96);
  held.Add("A", kTop, kTop);
  for (const auto& [low, high] :
       Spans({{96, 200}, {1, 33}, {40, 50}, {1, 200}, {kTop - 5, kTop}})) {
    EXPECT_EQ(held.Check("A", low, high).code(), absl::StatusCode::kInternal)
        << low << "-" << high;
  }
  EXPECT_TRUE(held.Check("A", 1, 32).ok());    // below
  EXPECT_TRUE(held.Check("A", 97, 128).ok());  // between
  EXPECT_TRUE(held.Check("B", 33, 96).ok());   // another node
  EXPECT_EQ(held.Intervals("A"), Spans({{33, 96}, {kTop, kTop}}));
}

TEST(HeldNumbersTest, TagsAreBoundedAndNeverForgotten) {
  HeldNumbers held;
  ASSERT_EQ(HeldNumbers::kMaxHeldTags, 256u);
  for (size_t i = 0; i < HeldNumbers::kMaxHeldTags; ++i) {
    const std::string tag = "T" + std::to_string(i);
    ASSERT_TRUE(held.Check(tag, 1, 1).ok());
    held.Add(tag, 1, 1);
    held.Remove(tag, 1, 1);
  }
  EXPECT_EQ(held.Check("NEW", 1, 1).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(held.Check("T0", 1, 1).ok());  // known, now empty
  EXPECT_THAT(held.Intervals("T0"), IsEmpty());
}

}  // namespace
}  // namespace hilo::internal
