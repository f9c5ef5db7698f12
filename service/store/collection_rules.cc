#include "service/store/collection_rules.h"

#include <algorithm>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"
#include "service/store/range_token.h"

namespace hilo {

namespace {

// Marks a guard-rail refusal; the value is unused.
constexpr char kGuardRailPayload[] =
    "type.googleapis.com/hilo.internal.GuardRailRefusal";

}  // namespace

absl::StatusOr<CollectionState> ApplyAllocate(absl::string_view collection,
                                              const CollectionState& row,
                                              int64_t size, int64_t floor,
                                              int64_t max_floor_jump,
                                              uint64_t token, absl::Time now,
                                              Range* range) {
  // row.max >= 0, so the difference cannot overflow.
  if (floor > row.max && floor - row.max > max_floor_jump) {
    absl::Status refusal = absl::FailedPreconditionError(absl::StrFormat(
        "collection \"%s\": last_max %d is %d above Max %d; a client may "
        "move Max at most %d above it (the server's --max_last_max_jump). "
        "If this node fell behind, an administrator raises it with SetFloor",
        collection, floor, floor - row.max, row.max, max_floor_jump));
    refusal.SetPayload(kGuardRailPayload, absl::Cord());
    return refusal;
  }
  const int64_t base = std::max(row.max, floor);
  if (base > std::numeric_limits<int64_t>::max() - size) {
    return absl::OutOfRangeError(absl::StrFormat(
        "collection \"%s\": a range of %d above %d would pass INT64_MAX",
        collection, size, base));
  }
  *range = Range{base + 1, base + size};
  CollectionState next;
  next.max = range->high;
  next.return_floor = base;
  // Only the digest is stored: a reader of the row cannot return with it.
  next.range_token = RangeTokenDigest(token);
  // Only a range issued right above the last one can hand that one back
  // its token: a whole return then leaves Max exactly at its high.
  if (base == row.max && row.range_token != 0) {
    next.previous_token = row.range_token;
    next.previous_return_floor = row.return_floor;
  }
  next.updated_at = now;
  return next;
}

bool IsGuardRailRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         status.GetPayload(kGuardRailPayload).has_value();
}

std::optional<CollectionState> ApplyReturn(const CollectionState& row,
                                           int64_t end, int64_t last,
                                           uint64_t token, absl::Time now,
                                           ReturnOutcome* outcome) {
  // last <= end, so an applied return never raises Max.
  const bool applies =
      row.max == end && last >= row.return_floor &&
      (token == 0 || RangeTokenDigest(token) == row.range_token);
  if (!applies) {
    *outcome = ReturnOutcome{false, row.max};
    return std::nullopt;
  }
  *outcome = ReturnOutcome{true, last};
  CollectionState next;
  next.max = last;
  next.updated_at = now;
  if (token != 0 && last == row.return_floor && row.previous_token != 0) {
    // The whole range came back: the range issued before it is the last
    // one again, with the token and floor it had.
    next.return_floor = row.previous_return_floor;
    next.range_token = row.previous_token;
  } else {
    // Part of it is in use, or nobody may return below it: retire the
    // token so the same return cannot apply twice.
    next.return_floor = last;
  }
  return next;
}

std::optional<CollectionState> ApplySetFloor(const CollectionState& row,
                                             int64_t floor, absl::Time now,
                                             FloorOutcome* outcome) {
  *outcome = FloorOutcome{row.max < floor, std::max(row.max, floor)};
  CollectionState next = row;
  if (floor > row.max) {
    // No range issued so far ends at the new Max: none may come back.
    next.max = floor;
    next.range_token = 0;
    next.previous_token = 0;
    next.previous_return_floor = 0;
  }
  next.return_floor = std::max(row.return_floor, floor);
  if (next.previous_token != 0) {
    next.previous_return_floor = std::max(row.previous_return_floor, floor);
  }
  if (next.max == row.max && next.return_floor == row.return_floor &&
      next.range_token == row.range_token &&
      next.previous_token == row.previous_token &&
      next.previous_return_floor == row.previous_return_floor) {
    return std::nullopt;
  }
  next.updated_at = now;
  return next;
}

absl::Status CheckDeletable(absl::string_view collection,
                            const CollectionState& row) {
  if (row.max == 0 && row.return_floor == 0 && row.range_token == 0 &&
      row.previous_token == 0 && row.previous_return_floor == 0) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "collection \"%s\" has Max %d and return floor %d: numbers of it were "
      "handed out (or a floor set), and a new row would start at 1 again, so "
      "it is kept; only a collection whose Max and return floor are 0 (never "
      "used, or every range returned whole) may be deleted",
      collection, row.max, row.return_floor));
}

int64_t RetiredMax(const CollectionState& row) {
  return std::max(row.max, row.return_floor);
}

CollectionState StartAfterRetirement(int64_t retired_max) {
  CollectionState row;
  row.max = retired_max;
  row.return_floor = retired_max;
  return row;
}

}  // namespace hilo
