// The PostgreSQL store's judges: one per kind of request, each deciding in
// memory, on the rows a batch read (PostgresBatch::rows), what the request
// does to them by the rules of collection_rules.h, and what it answers.
//
// A judge either changes the rows (marking each changed row dirty) and
// returns OK, or returns an error and changes nothing, so a refused request
// fails alone. (ReturnMany is one request whose items each succeed or fail
// alone, each as JudgeReturn would.) A name the batch read no row for has
// no row; Allocate and SetFloor create one from StartAfterRetirement of
// the Max its name was retired at (PostgresBatch::Row::retired_max, 0 if
// never). Nothing here is durable until the batch's COMMIT; the batch
// runner (postgres_batch_runner.h) answers only after it, and sets aside
// beforehand the requests on rows another session holds.
//
// Not thread-safe: they run on the thread running the batch.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_JUDGES_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_JUDGES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/postgres/postgres_batch.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// RangeStore::AllocateAsync; with `may_create` false
// (AllocateExistingAsync) a name without a row is NoRowRefusal.
absl::Status JudgeAllocate(PostgresBatch& batch, absl::string_view name,
                           int64_t size, int64_t floor, int64_t max_floor_jump,
                           uint64_t token, absl::Time now, bool may_create,
                           Allocation* out);

// RangeStore::ReturnAsync: a collection without a row applies nothing.
absl::Status JudgeReturn(PostgresBatch& batch, absl::string_view name,
                         int64_t end, int64_t last, uint64_t token,
                         absl::Time now, ReturnOutcome* out);

// RangeStore::ReturnManyAsync: every item in order, each as JudgeReturn (a
// foreign item only reads Max); `out` gets one outcome per item, an item's
// error among them: its arguments, or its row held by another session
// (batch.held) for all of `lock_timeout`. Returns how many items failed
// for a held row.
int JudgeReturnMany(PostgresBatch& batch, const std::vector<ReturnItem>& items,
                    absl::Time now, absl::Duration lock_timeout,
                    std::vector<absl::StatusOr<ReturnOutcome>>* out);

// RangeStore::SetFloorAsync: creates the row if there is none.
absl::Status JudgeSetFloor(PostgresBatch& batch, absl::string_view name,
                           int64_t floor, absl::Time now, FloorOutcome* out);

// RangeStore::DeleteAsync: NOT_FOUND without a row, FAILED_PRECONDITION
// (CheckDeletable) for a row that must stay.
absl::Status JudgeDelete(PostgresBatch& batch, absl::string_view name,
                         CollectionState* deleted);

// RangeStore::RetireAsync: NOT_FOUND without a row; otherwise removes it
// whatever it holds, and keeps its RetiredMax (the higher, if the batch
// retired the name before) for WriteRetired, which a new row of the name
// starts from (StartAfterRetirement).
absl::Status JudgeRetire(PostgresBatch& batch, absl::string_view name,
                         CollectionState* retired);

// RangeStore::PutForTesting: the row becomes `state`, no rule applied.
absl::Status JudgePut(PostgresBatch& batch, absl::string_view name,
                      const CollectionState& state);

// RangeStore::GetAsync: the row as the batch leaves it so far.
std::optional<CollectionState> JudgeGet(const PostgresBatch& batch,
                                        absl::string_view name);

// Whether `r`, judged on a collection without a row, would create one:
// false for a request that never creates (PostgresRequest::creates), and
// for one the rules refuse there on its own arguments (an allocation whose
// floor is more than max_floor_jump above 0, or whose range would pass
// INT64_MAX). The runner takes a name's creation lock only if some request
// of the batch would create its row: while the row is absent each request
// on it is judged on no row, so if none would create it there, none does.
// A name retired at `retired_max` is judged on the row it would start
// from (StartAfterRetirement), where a floor too far above 0 may be near
// enough.
bool CreatesRowWhenNone(const PostgresRequest& r, int64_t retired_max = 0);

// UNAVAILABLE for an operation on `collection`, whose row another session
// held locked (or, `creating`, was creating) for all of `lock_timeout`.
absl::Status LockedRowError(absl::string_view collection, bool creating,
                            absl::Duration lock_timeout);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_JUDGES_H_
