// The SQLite store's judges: one per kind of write, each deciding in memory,
// on the rows a batch holds (SqliteHeldRows), what the operation does to
// them by the rules of collection_rules.h, and what it answers.
//
// A judge either changes the rows and returns OK, or returns an error and
// changes nothing, so a batch needs no savepoint per operation: a failed
// operation simply left no trace. (ReturnMany is one operation whose items
// each succeed or fail alone, each as JudgeReturn would.) An error reading
// a row from the file is returned as is. Nothing here is durable until the
// batch's COMMIT; the batch writer calls the completions only after it.
//
// Not thread-safe: they run on the thread running the batch.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_JUDGES_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_JUDGES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/range_store.h"
#include "service/store/sqlite/sqlite_held_rows.h"

namespace hilo {
namespace internal {

// RangeStore::AllocateAsync on the held rows; with `may_create` false
// (AllocateExistingAsync) a name without a row is NoRowRefusal, unchanged.
absl::Status JudgeAllocate(SqliteHeldRows& rows, absl::string_view name,
                           int64_t size, int64_t floor, int64_t max_floor_jump,
                           uint64_t token, absl::Time now, Allocation* out,
                           bool may_create = true);

// RangeStore::ReturnAsync: a collection without a row applies nothing.
absl::Status JudgeReturn(SqliteHeldRows& rows, absl::string_view name,
                         int64_t end, int64_t last, uint64_t token,
                         absl::Time now, ReturnOutcome* out);

// RangeStore::ReturnManyAsync: every item in order, each as JudgeReturn
// (a foreign item only reads Max); `out` gets one outcome per item, an
// item's error (its arguments, or reading its row) among them. Always OK.
absl::Status JudgeReturnMany(const std::vector<ReturnItem>& items,
                             SqliteHeldRows& rows, absl::Time now,
                             std::vector<absl::StatusOr<ReturnOutcome>>* out);

// RangeStore::SetFloorAsync: creates the row if there is none.
absl::Status JudgeSetFloor(SqliteHeldRows& rows, absl::string_view name,
                           int64_t floor, absl::Time now, FloorOutcome* out);

// RangeStore::DeleteAsync: NOT_FOUND without a row, FAILED_PRECONDITION
// (CheckDeletable) for a row that must stay.
absl::Status JudgeDelete(SqliteHeldRows& rows, absl::string_view name,
                         CollectionState* deleted);
// RangeStore::RetireAsync: NOT_FOUND without a row; *retired is the row.
absl::Status JudgeRetire(SqliteHeldRows& rows, absl::string_view name,
                         CollectionState* retired);

// RangeStore::PutForTesting: the row becomes `state`, no rule applied.
absl::Status JudgePut(SqliteHeldRows& rows, absl::string_view name,
                      const CollectionState& state);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_JUDGES_H_
