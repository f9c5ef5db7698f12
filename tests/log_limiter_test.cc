// LogLimiter: at most N lines a second, each cut and escaped, with a count
// of what was dropped.
#include "service/observe/log_limiter.h"

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"

namespace hilo {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST(LogLimiterTest, LetsNLinesThroughASecondAndCountsTheRest) {
  ManualClock clock(kStart);
  LogLimiter limiter(3, 100, &clock);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(limiter.Admit("bad te header"),
                Optional(std::string("bad te header")));
  }
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(limiter.Admit("bad te header"), std::nullopt);
  clock.Advance(absl::Milliseconds(999));
  EXPECT_EQ(limiter.Admit("bad te header"), std::nullopt);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_THAT(
      limiter.Admit("next"),
      Optional(std::string("next (1001 lines dropped before this one)")));
  EXPECT_THAT(limiter.Admit("next"), Optional(std::string("next")));
}

// A clock stepped back (a wall clock) starts a new second: the log is not
// silenced until the clock is back where it was.
TEST(LogLimiterTest, ClockSteppedBackStartsANewSecond) {
  ManualClock clock(kStart);
  LogLimiter limiter(1, 100, &clock);
  EXPECT_THAT(limiter.Admit("a"), Optional(std::string("a")));
  EXPECT_EQ(limiter.Admit("b"), std::nullopt);
  clock.Set(kStart - absl::Minutes(10));
  EXPECT_THAT(limiter.Admit("c"),
              Optional(std::string("c (1 lines dropped before this one)")));
  EXPECT_EQ(limiter.Admit("d"), std::nullopt);
}

TEST(LogLimiterTest, CutsLongLinesAndEscapesControlCharacters) {
  ManualClock clock(kStart);
  LogLimiter limiter(10, 8, &clock);
  EXPECT_THAT(limiter.Admit(std::string(20000, 'x')),
              Optional(std::string("xxxxxxxx... (19992 bytes more)")));
  EXPECT_THAT(limiter.Admit("a\nb\x1b[2J"),
              Optional(std::string("a\\nb\\x1b[2J")));
}

}  // namespace
}  // namespace hilo
