#include "service/store/store_arguments.h"

#include "absl/strings/str_format.h"

namespace hilo {

absl::Status CheckAllocateArguments(int64_t size, int64_t floor, uint64_t token,
                                    int64_t max_floor_jump) {
  if (max_floor_jump < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max floor jump is %d; it must not be negative", max_floor_jump));
  }
  if (size < 1 || floor < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range size %d must be at least 1 and floor %d not negative", size,
        floor));
  }
  if (token == 0) {
    return absl::InvalidArgumentError(
        "range token is 0; a range needs a random non-zero token");
  }
  return absl::OkStatus();
}

absl::Status CheckReturnArguments(int64_t end, int64_t last) {
  if (last < 0 || last > end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "return of (last %d, end %d] needs 0 <= last <= end", last, end));
  }
  return absl::OkStatus();
}

absl::Status CheckFloorArgument(int64_t floor) {
  if (floor < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("floor is %d; it must not be negative", floor));
  }
  return absl::OkStatus();
}

absl::Status CheckListLimit(int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("list limit is %d; it must be at least 1", limit));
  }
  return absl::OkStatus();
}

}  // namespace hilo
