// RangeStore: the durable state of every collection.
//
// A collection's state is its Max (the highest number handed out; 0 if the
// collection was never seen) and the low of the range last issued. Each
// operation is atomic: it either applies completely and durably before it
// returns OK, or changes nothing.
#ifndef HILO_SERVICE_RANGE_STORE_H_
#define HILO_SERVICE_RANGE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hilo {

// An inclusive range of numbers [low, high].
struct Range {
  int64_t low = 0;
  int64_t high = 0;

  int64_t size() const { return high - low + 1; }
  friend bool operator==(const Range& a, const Range& b) {
    return a.low == b.low && a.high == b.high;
  }
};

// The stored row of one collection.
struct CollectionState {
  int64_t max = 0;  // highest number handed out
  // The lowest `last` a return may carry: low - 1 of the range last issued,
  // raised to `last` by an applied return and to the floor by SetFloor.
  int64_t return_floor = 0;
  absl::Time updated_at = absl::InfinitePast();  // time of the last change
};

// A stored collection and its name.
struct NamedCollectionState {
  std::string name;
  CollectionState state;
};

// The outcome of a SetFloor.
struct FloorOutcome {
  bool raised = false;
  int64_t max = 0;  // Max after the call
};

// The outcome of a Return.
struct ReturnOutcome {
  bool applied = false;
  int64_t max = 0;  // Max after the call
};

// Implementations are safe for concurrent use by many threads.
//
// Error codes: INVALID_ARGUMENT for arguments outside the documented
// contract; OUT_OF_RANGE when a range would pass INT64_MAX; UNAVAILABLE when
// the store is busy or had an I/O error (retry may succeed);
// RESOURCE_EXHAUSTED when the disk is full; INTERNAL for anything else. On
// any error nothing was changed.
class RangeStore {
 public:
  virtual ~RangeStore() = default;

  // Reserves `size` (>= 1) numbers: low = max(Max, floor) + 1,
  // high = low + size - 1, then stores Max = high and return_floor = low - 1.
  virtual absl::StatusOr<Range> Allocate(absl::string_view collection,
                                         int64_t size, int64_t floor) = 0;

  // Hands back the tail (last, end] of a range. Applied only if Max == end
  // and return_floor <= last; then Max = return_floor = last, so a second
  // return cannot move Max lower still. Otherwise nothing changes and the
  // outcome carries the current Max.
  // Requires 0 <= last <= end.
  virtual absl::StatusOr<ReturnOutcome> Return(absl::string_view collection,
                                               int64_t end, int64_t last) = 0;

  // The stored state, or nullopt if the collection has no row.
  virtual absl::StatusOr<std::optional<CollectionState>> Get(
      absl::string_view collection) = 0;

  // Up to `limit` (>= 1) collections whose names sort after `after` (byte
  // order), in that order.
  virtual absl::StatusOr<std::vector<NamedCollectionState>> List(
      absl::string_view after, int limit) = 0;

  // Max = max(Max, floor), creating the row if needed; when Max moves,
  // return_floor becomes floor so no earlier range can be returned below
  // the floor. Requires floor >= 0.
  virtual absl::StatusOr<FloorOutcome> SetFloor(absl::string_view collection,
                                                int64_t floor) = 0;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RANGE_STORE_H_
