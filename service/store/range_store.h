// RangeStore: the durable state of every collection.
//
// A collection's state is its Max (the highest number handed out; 0 if the
// collection was never seen), the return floor, and the token of the range
// last issued. Each operation is atomic: it either applies completely and
// durably before it returns OK, or changes nothing.
#ifndef HILO_SERVICE_STORE_RANGE_STORE_H_
#define HILO_SERVICE_STORE_RANGE_STORE_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
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
  // RangeTokenDigest of the token of the range last issued (never the token
  // itself); 0 once retired (by an applied return or a floor above Max),
  // after which no tokened return applies.
  uint64_t range_token = 0;
  // The range issued just before it, when the last range was issued right
  // above it (its low = that range's high + 1): that range's token digest
  // and return floor, which a whole return of the last range restores. 0 and 0
  // when there is none.
  uint64_t previous_token = 0;
  int64_t previous_return_floor = 0;
  absl::Time updated_at = absl::InfinitePast();  // time of the last change
};

// A database whose history went back, and what the store did about it:
// a PostgreSQL standby promoted or a restore (postgres_history.h), a
// machine that went down under an SQLite file (sqlite_reservations.h).
struct StoreHistoryEvent {
  // What was seen, e.g. "the database's history changed from system
  // identifier S, timeline 1 to system identifier S, timeline 2".
  std::string reason;
  // Collections moved on past every number that may have been handed out,
  // and the numbers skipped so (saturating).
  int64_t collections = 0;
  int64_t numbers_skipped = 0;
};

// A stored collection and its name.
struct NamedCollectionState {
  std::string name;
  CollectionState state;
};

// The outcome of an Allocate.
struct Allocation {
  Range range;
  bool created = false;  // the call stored the collection's first row
};

// The outcome of a SetFloor.
struct FloorOutcome {
  bool raised = false;
  int64_t max = 0;       // Max after the call
  bool created = false;  // the call stored the collection's first row
};

// The outcome of a Return.
struct ReturnOutcome {
  bool applied = false;
  int64_t max = 0;  // Max after the call
};

// One return of a ReturnManyAsync: as ReturnAsync's arguments.
struct ReturnItem {
  std::string collection;
  int64_t end = 0;
  int64_t last = 0;
  uint64_t token = 0;
  // The range is another node's: the item is refused and its outcome only
  // carries the collection's Max (0 without a row).
  bool foreign = false;
};

// AllocateExistingAsync's NOT_FOUND for `collection`, which has no row.
absl::Status NoRowRefusal(absl::string_view collection);
// Whether `status` is NoRowRefusal's (a payload says so).
bool IsNoRowRefusal(const absl::Status& status);

// The refusal of a store that counts its rows for every server sharing it
// (PostgreSQL with max_collections): RESOURCE_EXHAUSTED naming
// `collection`, which would be a new row while the store holds `max`.
absl::Status StoreFullRefusal(absl::string_view collection, int64_t max);
// Whether `status` is StoreFullRefusal's (a payload says so).
bool IsStoreFullRefusal(const absl::Status& status);

// The max_floor_jump that puts no limit on how far a floor lifts Max.
inline constexpr int64_t kNoFloorJumpLimit =
    std::numeric_limits<int64_t>::max();

// Receives an operation's outcome.
template <typename T>
using StoreCallback = absl::AnyInvocable<void(absl::StatusOr<T>)>;

// Implementations are safe for concurrent use by many threads.
//
// Each operation comes in two forms. The asynchronous one (…Async) returns
// at once and calls `done` exactly once: after the operation is durable, or
// has failed; on a thread of the store, or on the caller's thread before
// returning for arguments refused up front. `done` must be quick and must
// not call the store's synchronous forms (it may run on the thread they
// would wait for). The synchronous form waits for the asynchronous one.
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
  // high = low + size - 1, then stores Max = high, return_floor = low - 1
  // and range_token = RangeTokenDigest(`token`). If low == Max + 1, the range
  // issued before becomes the previous one (its token and return floor are
  // kept); otherwise there is none. `token` (!= 0) is the caller's secret for
  // returning the range: random, never a counter. The outcome says whether
  // the collection's row was created (the services count rows by it: see
  // CollectionLimit); the synchronous form gives the range alone.
  //
  // A row created for a retired name starts from StartAfterRetirement
  // (collection_rules.h), and counts as created.
  //
  // The guard rail: a `floor` more than `max_floor_jump` (>= 0) above Max
  // is FAILED_PRECONDITION (IsGuardRailRefusal) and changes nothing. It is
  // judged against Max inside the operation's transaction, so no other
  // server can move Max between the check and the write.
  void AllocateAsync(absl::string_view collection, int64_t size, int64_t floor,
                     uint64_t token, int64_t max_floor_jump,
                     StoreCallback<Allocation> done);
  absl::StatusOr<Range> Allocate(absl::string_view collection, int64_t size,
                                 int64_t floor, uint64_t token,
                                 int64_t max_floor_jump = kNoFloorJumpLimit);
  // AllocateAsync for a collection that has a row: without one it is
  // NOT_FOUND (IsNoRowRefusal) and nothing is stored. The row is looked
  // for in the allocation's own transaction, so a caller over the
  // collection limit pays no read of its own (and never queues behind the
  // store's readers) to learn whether its collection exists.
  void AllocateExistingAsync(absl::string_view collection, int64_t size,
                             int64_t floor, uint64_t token,
                             int64_t max_floor_jump,
                             StoreCallback<Allocation> done);

  // Hands back the tail (last, end] of a range. With a token (!= 0):
  // applied only if RangeTokenDigest(token) == range_token, Max == end and
  // return_floor <= last. Then Max = last, and
  //  - if last == return_floor (the whole range, or all of it above a floor
  //    SetFloor raised into it) and there is a previous range: that range
  //    becomes the last issued again (its token and return floor are
  //    restored; a floor above its high leaves its returns refused by
  //    Max == end);
  //  - otherwise return_floor = last and the token is retired,
  // so no return applies twice and none moves Max below a number another
  // caller holds. Without a token (0, for old clients): applied if Max ==
  // end and return_floor <= last; then Max = return_floor = last and the
  // tokens are retired. Otherwise nothing changes and the outcome carries
  // the current Max. Requires 0 <= last <= end.
  void ReturnAsync(absl::string_view collection, int64_t end, int64_t last,
                   uint64_t token, StoreCallback<ReturnOutcome> done);
  absl::StatusOr<ReturnOutcome> Return(absl::string_view collection,
                                       int64_t end, int64_t last,
                                       uint64_t token);

  // Many returns, judged one after another in the given order, each exactly
  // as ReturnAsync judges it (so a later item sees what an earlier one did);
  // `done` gets one outcome per item, in order. An item refused for its
  // arguments or failing alone leaves the others as they are; a failure of
  // the whole transaction fails every item. Stores that can do better than
  // this default (a ReturnAsync per item, queued in order)
  // put every item into one operation, so the batch costs one commit.
  virtual void ReturnManyAsync(
      std::vector<ReturnItem> items,
      StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done);

  // The stored state, or nullopt if the collection has no row.
  virtual void GetAsync(absl::string_view collection,
                        StoreCallback<std::optional<CollectionState>> done) = 0;
  absl::StatusOr<std::optional<CollectionState>> Get(
      absl::string_view collection);

  // Up to `limit` (>= 1) collections whose names sort after `after` (byte
  // order), in that order.
  void ListAsync(absl::string_view after, int limit,
                 StoreCallback<std::vector<NamedCollectionState>> done);
  absl::StatusOr<std::vector<NamedCollectionState>> List(
      absl::string_view after, int limit);

  // Max = max(Max, floor), creating the row if needed (from
  // StartAfterRetirement, for a retired name), and, whatever Max
  // was, return_floor = max(return_floor, floor) (and the same for the
  // previous range's), so no return can move Max below the floor. When Max
  // moves, the tokens are retired. Requires floor >= 0.
  void SetFloorAsync(absl::string_view collection, int64_t floor,
                     StoreCallback<FloorOutcome> done);
  absl::StatusOr<FloorOutcome> SetFloor(absl::string_view collection,
                                        int64_t floor);

  // Deletes the collection's row if no number of it can ever come back
  // (CheckDeletable): nothing issued is outstanding, no floor was set, and
  // no token can still be returned, so a NextRange after the deletion hands
  // out exactly what it would have without it. Judged inside the
  // operation's transaction, after every operation queued before it.
  // NOT_FOUND if there is no row; FAILED_PRECONDITION naming the collection
  // and its Max if the row must stay (it is then unchanged).
  virtual void DeleteAsync(absl::string_view collection,
                           StoreCallback<CollectionState> done) = 0;
  // The deleted row.
  absl::StatusOr<CollectionState> Delete(absl::string_view collection);

  // Retires the collection: removes its row whatever it holds (it no
  // longer counts among the stored rows, nor shows in List or Get) and
  // keeps RetiredMax of it with the name, so that a later row of the name
  // starts from StartAfterRetirement: its first range is above every
  // number the name ever handed out, its ranges issued before are kept by
  // their holders, and no return of them applies (the tokens are gone).
  // Retiring a name again keeps the higher Max. Judged inside the
  // operation's transaction, after every operation queued before it.
  // NOT_FOUND if there is no row (then nothing changes). `done` gets the
  // row as it was.
  virtual void RetireAsync(absl::string_view collection,
                           StoreCallback<CollectionState> done) = 0;
  // The retired row.
  absl::StatusOr<CollectionState> Retire(absl::string_view collection);

  // Collections stored (rows) as this store last learned it.
  virtual int64_t collection_count() const = 0;

  // Sets a row directly, bypassing every rule; for tests that need a state
  // such as Max near INT64_MAX.
  virtual absl::Status PutForTesting(absl::string_view collection,
                                     const CollectionState& state) = 0;

 protected:
  // The operations behind AllocateAsync, ReturnAsync, ListAsync and
  // SetFloorAsync, which check their arguments (collection_rules.h) and
  // refuse bad ones with INVALID_ARGUMENT before calling these; so a store
  // only sees arguments inside the contract.
  // `may_create` false: AllocateExistingAsync (NoRowRefusal without a row).
  virtual void DoAllocateAsync(absl::string_view collection, int64_t size,
                               int64_t floor, uint64_t token,
                               int64_t max_floor_jump, bool may_create,
                               StoreCallback<Allocation> done) = 0;
  virtual void DoReturnAsync(absl::string_view collection, int64_t end,
                             int64_t last, uint64_t token,
                             StoreCallback<ReturnOutcome> done) = 0;
  virtual void DoListAsync(
      absl::string_view after, int limit,
      StoreCallback<std::vector<NamedCollectionState>> done) = 0;
  virtual void DoSetFloorAsync(absl::string_view collection, int64_t floor,
                               StoreCallback<FloorOutcome> done) = 0;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_RANGE_STORE_H_
