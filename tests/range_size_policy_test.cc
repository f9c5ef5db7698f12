#include "service/store/range_size_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

TEST(RangeSizePolicyTest, NewClientGetsMinimum) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(0, std::nullopt, kNow), 32);
}

TEST(RangeSizePolicyTest, NoPreviousTimeKeepsClampedSize) {
  RangeSizePolicy policy({32, 1024});
  EXPECT_EQ(policy.NextSize(100, std::nullopt, kNow), 100);
  EXPECT_EQ(policy.NextSize(5, std::nullopt, kNow), 32);
  EXPECT_EQ(policy.NextSize(5000, std::nullopt, kNow), 1024);
  EXPECT_EQ(policy.NextSize(-7, std::nullopt, kNow), 32);
}

TEST(RangeSizePolicyTest, DoublesWhenAskedWithinFiveQuartersOfTheRunway) {
  RangeSizePolicy policy({32, 1 << 20});  // runway 30 s: grow under 37.5 s
  EXPECT_EQ(policy.grow_within(), absl::Milliseconds(37500));
  EXPECT_EQ(policy.NextSize(32, kNow, kNow), 64);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Seconds(30), kNow), 128);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Milliseconds(37499), kNow), 128);
}

TEST(RangeSizePolicyTest, KeepsSizeUpToFiveRunways) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.shrink_after(), absl::Seconds(150));
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Milliseconds(37500), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(90), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(150), kNow), 256);
}

TEST(RangeSizePolicyTest, HalvesAfterFiveRunways) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Milliseconds(150001), kNow), 128);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Hours(24), kNow), 128);
}

TEST(RangeSizePolicyTest, RunwaySetsTheThresholds) {
  RangeSizePolicy policy(
      {.min_size = 32, .max_size = 1 << 20, .runway = absl::Seconds(8)});
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Milliseconds(9999), kNow), 128);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Seconds(10), kNow), 64);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Seconds(40), kNow), 64);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Milliseconds(40001), kNow), 32);
}

TEST(RangeSizePolicyTest, RunwayZeroKeepsTheRuleBeforeTheRunway) {
  RangeSizePolicy policy(
      {.min_size = 32, .max_size = 1 << 20, .runway = absl::ZeroDuration()});
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Milliseconds(29999), kNow), 128);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(30), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(60), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Milliseconds(60001), kNow), 128);
}

// A client drawing `rate` numbers a second, for ever, that asks for its next
// range once it has taken ceil(prefetch_at * size) numbers of the current
// one (the clients' rule, CONTRACT.md R3) and starts on it when the current
// one is used up; the server answers at once. Returns, for each request
// after the first `skip`, the time the numbers it still held (the rest of
// its current range) last at that rate.
std::vector<absl::Duration> RunwaysAtRequests(const RangeSizePolicy& policy,
                                              double rate, double prefetch_at,
                                              int requests, int skip) {
  std::vector<absl::Duration> runways;
  const auto at = [&](double numbers) { return absl::Seconds(numbers / rate); };
  absl::Time start = kNow;  // when the current range's first number goes
  int64_t size = policy.NextSize(0, std::nullopt, start);
  absl::Time issued = start;
  for (int i = 0; i < requests; ++i) {
    const int64_t before_asking =
        static_cast<int64_t>(std::ceil(prefetch_at * size));
    const absl::Time asked = start + at(before_asking);
    if (i >= skip) runways.push_back(at(size - before_asking));
    const int64_t next = policy.NextSize(size, issued, asked);
    issued = asked;
    start += at(size);
    size = next;
  }
  return runways;
}

TEST(RangeSizePolicyTest, SteadyClientHoldsTheRunwayWhenItAsks) {
  for (absl::Duration runway : {absl::Seconds(30), absl::Seconds(5)}) {
    RangeSizePolicy policy(
        {.min_size = 32, .max_size = int64_t{1} << 40, .runway = runway});
    // Rates at which the rule before the runway swung between a quarter
    // and the whole (490/s, 1564/s) and others across four decades.
    for (double rate : {3.0, 10.0, 97.0, 490.46, 1000.0, 1564.54, 3000.0,
                        20000.0, 183.58, 2350.92}) {
      const std::vector<absl::Duration> runways =
          RunwaysAtRequests(policy, rate, 0.2, 80, 40);
      for (absl::Duration held : runways) {
        EXPECT_GE(held, runway) << "rate " << rate << "/s, runway " << runway;
      }
    }
  }
}

TEST(RangeSizePolicyTest, RuleBeforeTheRunwaySwingsBelowIt) {
  // The figure docs/reliability.md gives: 13.4 s in hand at 490 IDs/s.
  RangeSizePolicy policy({.min_size = 32,
                          .max_size = int64_t{1} << 40,
                          .runway = absl::ZeroDuration()});
  const std::vector<absl::Duration> runways =
      RunwaysAtRequests(policy, 490.46, 0.2, 80, 40);
  EXPECT_LT(*std::min_element(runways.begin(), runways.end()),
            absl::Seconds(14));
  EXPECT_GT(*std::max_element(runways.begin(), runways.end()),
            absl::Seconds(53));
}

TEST(RangeSizePolicyTest, ClampsToLimits) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(1 << 20, kNow, kNow), 1 << 20);
  EXPECT_EQ(policy.NextSize(32, kNow - absl::Hours(1), kNow), 32);
  EXPECT_EQ(policy.NextSize(int64_t{1} << 40, kNow, kNow), 1 << 20);
  EXPECT_EQ(policy.NextSize(INT64_MAX, kNow, kNow), 1 << 20);
}

TEST(RangeSizePolicyTest, DoublingNearInt64MaxDoesNotOverflow) {
  RangeSizePolicy policy({1, INT64_MAX});
  EXPECT_EQ(policy.NextSize(INT64_MAX / 2 + 1, kNow, kNow), INT64_MAX);
  EXPECT_EQ(policy.NextSize(INT64_MAX, kNow, kNow), INT64_MAX);
}

TEST(RangeSizePolicyTest, FutureTimeCountsAsNow) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(32, kNow + absl::Hours(5), kNow), 64);
}

TEST(RangeSizePolicyTest, ValidatesLimits) {
  EXPECT_THAT(ValidateRangeSizeLimits({32, 32}), IsOk());
  EXPECT_THAT(ValidateRangeSizeLimits({0, 32}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateRangeSizeLimits({64, 32}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateRangeSizeLimits({32, 32, absl::ZeroDuration()}), IsOk());
  EXPECT_THAT(ValidateRangeSizeLimits({32, 32, absl::Hours(1)}), IsOk());
  EXPECT_THAT(ValidateRangeSizeLimits({32, 32, -absl::Seconds(1)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "range runway is -1s; it must be from 0 to 1h"));
  EXPECT_THAT(ValidateRangeSizeLimits({32, 32, absl::Hours(2)}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hilo
