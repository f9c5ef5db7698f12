// ExhaustionReporter (service/observe/exhaustion_reporter.h): one log line
// per collection whose Max passes its share of INT64_MAX.
#include "service/observe/exhaustion_reporter.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"

namespace hilo {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST(ExhaustionReporterTest, LogsOncePerCollectionCrossing) {
  ManualClock clock(kStart);
  std::vector<std::string> lines;
  ExhaustionReporter reporter(
      0.5, &clock, [&](const std::string& l) { lines.push_back(l); });
  const int64_t half = std::numeric_limits<int64_t>::max() / 2;
  const Range below{half - 10, half - 1};
  reporter.OnNextRange("a", absl::OkStatus(), &below, absl::ZeroDuration());
  EXPECT_TRUE(lines.empty());
  const Range above{half, half + 9};
  reporter.OnNextRange("a", absl::OkStatus(), &above, absl::ZeroDuration());
  reporter.OnNextRange("a", absl::OkStatus(), &above, absl::ZeroDuration());
  const FloorOutcome floor{true, half + 100, false};
  reporter.OnSetFloor("b", absl::OkStatus(), &floor);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0],
              HasSubstr("collection \\\"a\\\" is near exhaustion: Max "
                        "4611686018427387912 has passed 0.5"));
  EXPECT_THAT(lines[1], HasSubstr("collection \\\"b\\\" is near"));
}

}  // namespace
}  // namespace hilo
