// The rules every RangeStore applies to a collection's row.
//
// A store reads the row, asks these functions what the row becomes, and
// writes the result in the same transaction; how it reads and writes is its
// own business, what the row becomes is decided here once, so that every
// backend keeps exactly the contract of range_store.h. The functions are
// pure: no I/O, no clock of their own, no randomness.
//
//   CollectionState row = ...;  // read inside the transaction
//   Range range;
//   absl::StatusOr<CollectionState> next =
//       ApplyAllocate("orders", row, 32, 0, token, now, &range);
//   if (next.ok()) ...;         // write *next, then reply with `range`
#ifndef HILO_SERVICE_STORE_COLLECTION_RULES_H_
#define HILO_SERVICE_STORE_COLLECTION_RULES_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/range_store.h"

namespace hilo {

// The row after allocating `size` numbers above max(row.max, floor) with
// `token`, and the range in *range. A collection without a row is a
// default CollectionState. The row must stay as it was on an error:
// FAILED_PRECONDITION (IsGuardRailRefusal) if `floor` is more than
// `max_floor_jump` above row.max; OUT_OF_RANGE if the range would pass
// INT64_MAX. Both messages name `collection`.
absl::StatusOr<CollectionState> ApplyAllocate(absl::string_view collection,
                                              const CollectionState& row,
                                              int64_t size, int64_t floor,
                                              int64_t max_floor_jump,
                                              uint64_t token, absl::Time now,
                                              Range* range);

// Whether `status` is ApplyAllocate's refusal of a floor too far above Max
// (it carries a payload saying so, which survives every store's batching).
bool IsGuardRailRefusal(const absl::Status& status);

// The row after a return of (last, end] with `token` (0: without one), or
// nullopt if the return is refused and the row stays as it was. *outcome
// is set either way.
std::optional<CollectionState> ApplyReturn(const CollectionState& row,
                                           int64_t end, int64_t last,
                                           uint64_t token, absl::Time now,
                                           ReturnOutcome* outcome);

// The row after SetFloor(floor), or nullopt if nothing about it changes.
// *outcome is set either way.
std::optional<CollectionState> ApplySetFloor(const CollectionState& row,
                                             int64_t floor, absl::Time now,
                                             FloorOutcome* outcome);

// OK if deleting `row` can never bring a number back: its row is then as
// good as none (Max 0, return floor 0, no token of a range or a previous
// range), so a NextRange after the deletion starts at 1 exactly as it
// would have on the row. That holds for a collection never used and for
// one whose every range came back whole (Max back at 0); a collection with
// a number out, or with a floor ever set, keeps its row: the next range
// would start at 1 again and reissue numbers. FAILED_PRECONDITION naming
// `collection`, its Max and return floor otherwise.
absl::Status CheckDeletable(absl::string_view collection,
                            const CollectionState& row);

// Retiring (RangeStore::RetireAsync): the number a retired `row` is kept
// at, the highest it ever handed out or promised (its Max, or its return
// floor if a row set by hand has that higher).
int64_t RetiredMax(const CollectionState& row);

// The row a collection without one starts from when its name was retired
// at `retired_max` (0: never retired, a default CollectionState): Max and
// return floor at retired_max and no token, so its first range starts
// above every number the name handed out before, and no return of a range
// issued before the retirement ever applies.
CollectionState StartAfterRetirement(int64_t retired_max);

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_COLLECTION_RULES_H_
