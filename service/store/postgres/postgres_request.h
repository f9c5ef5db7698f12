// PostgresRequest: one operation of a batch, shared by the store's front
// (postgres_range_store.cc), which fills it in, and its batch runner
// (postgres_batch_runner.h) and judges (postgres_judges.h), which run it.
// Private to service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "service/store/group_commit.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// One operation of a batch: what it asks and, once run, what it got.
struct PostgresRequest : GroupCommit::Operation {
  enum class Kind {
    kAllocate,
    kReturn,
    kSetFloor,
    kPut,
    kDelete,
    kGet,
    kList,
    kReturnMany,  // ReturnManyAsync: `items`, judged in order
    kProbe,       // counts the rows; on the read connection
    kRenew        // on the write connection: renews the node tag's lease, if
                  // any, and shows whether writes reach the database
  };
  Kind kind = Kind::kGet;
  std::string name;  // the collection; for kList, the name to list after
  int64_t size = 0, floor = 0, end = 0, last = 0;
  int64_t max_floor_jump = kNoFloorJumpLimit;
  // kAllocate: false for AllocateExistingAsync (no row: NoRowRefusal).
  bool may_create = true;
  uint64_t token = 0;
  int limit = 0;
  CollectionState put;            // for kPut
  bool retire = false;            // kDelete is RetireAsync
  std::vector<ReturnItem> items;  // for kReturnMany

  bool writes() const {
    return kind == Kind::kAllocate || kind == Kind::kReturn ||
           kind == Kind::kSetFloor || kind == Kind::kPut ||
           kind == Kind::kDelete || kind == Kind::kReturnMany;
  }
  // Whether it inserts its collection's row when there is none.
  bool creates() const {
    return (kind == Kind::kAllocate && may_create) || kind == Kind::kSetFloor ||
           kind == Kind::kPut;
  }
  // The collections whose rows the operation writes, and those it only
  // reads (a foreign item's, for its Max).
  void Rows(std::vector<std::string>* writes_to,
            std::vector<std::string>* reads) const {
    if (kind == Kind::kReturnMany) {
      for (const ReturnItem& item : items) {
        (item.foreign ? reads : writes_to)->push_back(item.collection);
      }
    } else if (writes()) {
      writes_to->push_back(name);
    } else if (kind == Kind::kGet) {
      reads->push_back(name);
    }
  }

  // Waiting for rows another session holds locked (see
  // PostgresBatchRunner).
  // Set by the batch that found a row this operation writes locked: the
  // operation did not run, and runs again in a later batch.
  bool deferred = false;
  // Deferred only because the batch had created its share of new rows
  // (nobody holds the row): runs again at once, before newer creations,
  // until lock_deadline.
  bool postponed = false;
  // Its reply waits until the standbys confirm the batch's commit: it hands
  // out (or floors) numbers above this server's confirmed reservation.
  bool awaits_standbys = false;
  // When it stops waiting and fails; set when it is first deferred.
  std::optional<std::chrono::steady_clock::time_point> lock_deadline;
  // Times it was deferred: the wait before the next try grows with it.
  int lock_tries = 0;

  // The caller's completion, given the request that ran (which may be a
  // retry's, see TakeForRetry) and its status; `done` calls it once bound.
  absl::AnyInvocable<void(PostgresRequest&, absl::Status)> finish;
  void BindFinish() {
    done = [this](absl::Status s) { finish(*this, std::move(s)); };
  }

  // A new request asking what this one asks, with its completion (finish)
  // and its wait so far; this one is left completing nothing.
  std::unique_ptr<PostgresRequest> TakeForRetry() {
    auto r = std::make_unique<PostgresRequest>();
    r->read_only = read_only;
    r->finish = std::move(finish);
    r->BindFinish();
    done = [](absl::Status) {};
    r->kind = kind;
    r->name = name;
    r->size = size;
    r->floor = floor;
    r->end = end;
    r->last = last;
    r->max_floor_jump = max_floor_jump;
    r->may_create = may_create;
    r->token = token;
    r->limit = limit;
    r->put = put;
    r->retire = retire;
    r->items = items;
    r->lock_deadline = lock_deadline;
    r->lock_tries = lock_tries;
    return r;
  }

  // Results.
  Allocation allocation;
  ReturnOutcome returned;
  FloorOutcome floored;
  CollectionState deleted;
  std::optional<CollectionState> state;
  std::vector<NamedCollectionState> rows;
  std::vector<absl::StatusOr<ReturnOutcome>> many;  // kReturnMany
  int64_t count = 0;                                // kProbe: rows in the table
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_
