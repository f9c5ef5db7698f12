// RangeSizePolicy: how many numbers the next range of a collection holds.
//
// The rule (RavenDB's, with thresholds set by a runway): clamp the client's
// previous size into [min, max]; then, by the age of its previous range,
// double it (under grow_within), halve it (over shrink_after) or keep it,
// and clamp again. A client without a previous range gets the clamped size
// it sent, which for a new client (size 0) is min.
//
// The runway (--range_runway, 30 s by default) is how long the numbers a
// client in steady use holds when it asks for its next range should last,
// so that a store failover shorter than that makes no call wait. A client
// asks when a fifth of its range is used (every client's default
// prefetch_at, 0.2), so it then holds four fifths of it: ranges must last
// at least 5/4 of the runway, and grow_within is 5/4 of it. shrink_after is
// 4 times grow_within: the age a client reports lags its size (it spans
// the tail of the range before and the head of this one), and with a
// narrower band a doubling overshoots into a halving, and the size swings
// between a quarter and the whole of what it should be for ever
// (docs/reliability.md, "A runway that covers a failover"). A runway of 0
// keeps the rule hilo had before it: double under 30 s, halve over 60 s.
//
//   RangeSizePolicy policy({.min_size = 32, .max_size = 1 << 20});
//   int64_t size = policy.NextSize(32, now - absl::Seconds(5), now);  // 64
#ifndef HILO_SERVICE_STORE_RANGE_SIZE_POLICY_H_
#define HILO_SERVICE_STORE_RANGE_SIZE_POLICY_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hilo {

inline constexpr int64_t kDefaultMinRangeSize = 32;
inline constexpr int64_t kDefaultMaxRangeSize = int64_t{1} << 20;

inline constexpr absl::Duration kDefaultRangeRunway = absl::Seconds(30);
inline constexpr absl::Duration kMaxRangeRunway = absl::Hours(1);

// The thresholds of a runway of 0: the rule before the runway.
inline constexpr absl::Duration kLegacyGrowWithin = absl::Seconds(30);
inline constexpr absl::Duration kLegacyShrinkAfter = absl::Seconds(60);

struct RangeSizeLimits {
  int64_t min_size = kDefaultMinRangeSize;
  int64_t max_size = kDefaultMaxRangeSize;
  // Seconds of numbers a client in steady use should hold when it asks
  // for its next range; 0: the legacy thresholds.
  absl::Duration runway = kDefaultRangeRunway;
};

// Returns OK if 1 <= min_size <= max_size and 0 <= runway <= 1 h, else
// INVALID_ARGUMENT.
absl::Status ValidateRangeSizeLimits(const RangeSizeLimits& limits);

// Immutable and thread-safe.
class RangeSizePolicy {
 public:
  // `limits` must be valid (see ValidateRangeSizeLimits).
  explicit RangeSizePolicy(RangeSizeLimits limits);

  // The size of the next range for a client whose previous range had
  // `last_size` numbers and was issued at `last_range_at` (nullopt if the
  // client has none). A `last_range_at` after `now` counts as `now`.
  // `last_size` may be any value; negative counts as 0.
  int64_t NextSize(int64_t last_size, std::optional<absl::Time> last_range_at,
                   absl::Time now) const;

  const RangeSizeLimits& limits() const { return limits_; }
  // A previous range younger than this doubles; older than shrink_after
  // halves.
  absl::Duration grow_within() const { return grow_within_; }
  absl::Duration shrink_after() const { return shrink_after_; }

 private:
  int64_t Clamp(int64_t size) const;

  const RangeSizeLimits limits_;
  const absl::Duration grow_within_;
  const absl::Duration shrink_after_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_RANGE_SIZE_POLICY_H_
