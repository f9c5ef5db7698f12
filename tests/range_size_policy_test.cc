#include "service/store/range_size_policy.h"

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

TEST(RangeSizePolicyTest, DoublesWhenAskedWithin30Seconds) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(32, kNow, kNow), 64);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Seconds(29), kNow), 128);
  EXPECT_EQ(policy.NextSize(64, kNow - absl::Milliseconds(29999), kNow), 128);
}

TEST(RangeSizePolicyTest, KeepsSizeBetween30And60Seconds) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(30), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(45), kNow), 256);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Seconds(60), kNow), 256);
}

TEST(RangeSizePolicyTest, HalvesAfter60Seconds) {
  RangeSizePolicy policy({32, 1 << 20});
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Milliseconds(60001), kNow), 128);
  EXPECT_EQ(policy.NextSize(256, kNow - absl::Hours(24), kNow), 128);
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
}

}  // namespace
}  // namespace hilo
