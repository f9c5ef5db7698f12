// RangeSizePolicy: how many numbers the next range of a collection holds.
//
// The rule (RavenDB's): clamp the client's previous size into [min, max];
// then, by the age of its previous range, double it (under 30 s), halve it
// (over 60 s) or keep it, and clamp again. A client without a previous range
// gets the clamped size it sent, which for a new client (size 0) is min.
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

// Ranges asked for more often than this grow; less often than kShrinkAfter
// shrink.
inline constexpr absl::Duration kGrowWithin = absl::Seconds(30);
inline constexpr absl::Duration kShrinkAfter = absl::Seconds(60);

struct RangeSizeLimits {
  int64_t min_size = kDefaultMinRangeSize;
  int64_t max_size = kDefaultMaxRangeSize;
};

// Returns OK if 1 <= min_size <= max_size, else INVALID_ARGUMENT.
absl::Status ValidateRangeSizeLimits(const RangeSizeLimits& limits);

// Immutable and thread-safe.
class RangeSizePolicy {
 public:
  // `limits` must be valid (see ValidateRangeSizeLimits).
  explicit RangeSizePolicy(RangeSizeLimits limits) : limits_(limits) {}

  // The size of the next range for a client whose previous range had
  // `last_size` numbers and was issued at `last_range_at` (nullopt if the
  // client has none). A `last_range_at` after `now` counts as `now`.
  // `last_size` may be any value; negative counts as 0.
  int64_t NextSize(int64_t last_size, std::optional<absl::Time> last_range_at,
                   absl::Time now) const;

  const RangeSizeLimits& limits() const { return limits_; }

 private:
  int64_t Clamp(int64_t size) const;

  const RangeSizeLimits limits_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_RANGE_SIZE_POLICY_H_
