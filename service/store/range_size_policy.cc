#include "service/store/range_size_policy.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace hilo {

absl::Status ValidateRangeSizeLimits(const RangeSizeLimits& limits) {
  if (limits.min_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "min range size is %d; it must be at least 1", limits.min_size));
  }
  if (limits.max_size < limits.min_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max range size %d is below min range size %d",
                        limits.max_size, limits.min_size));
  }
  if (limits.runway < absl::ZeroDuration() || limits.runway > kMaxRangeRunway) {
    return absl::InvalidArgumentError(
        absl::StrFormat("range runway is %s; it must be from 0 to %s",
                        absl::FormatDuration(limits.runway),
                        absl::FormatDuration(kMaxRangeRunway)));
  }
  return absl::OkStatus();
}

RangeSizePolicy::RangeSizePolicy(RangeSizeLimits limits)
    : limits_(limits),
      grow_within_(limits.runway == absl::ZeroDuration()
                       ? kLegacyGrowWithin
                       : limits.runway * 5 / 4),
      shrink_after_(limits.runway == absl::ZeroDuration() ? kLegacyShrinkAfter
                                                          : limits.runway * 5) {
}

int64_t RangeSizePolicy::Clamp(int64_t size) const {
  return std::clamp(size, limits_.min_size, limits_.max_size);
}

int64_t RangeSizePolicy::NextSize(int64_t last_size,
                                  std::optional<absl::Time> last_range_at,
                                  absl::Time now) const {
  const int64_t size = Clamp(last_size);
  if (!last_range_at.has_value()) return size;
  const absl::Duration age = now - std::min(*last_range_at, now);
  if (age < grow_within_) {
    // size <= max_size <= INT64_MAX, so compare before doubling.
    return size > limits_.max_size / 2 ? limits_.max_size : Clamp(size * 2);
  }
  if (age > shrink_after_) return Clamp(size / 2);
  return size;
}

}  // namespace hilo
