// PostgresRangeStore::Request: one operation of a batch, shared by the
// store's front (postgres_range_store.cc), which fills it in, and its batch
// runner (postgres_batch_runner.cc), which runs it. Private to
// service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "service/store/group_commit.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/range_store.h"

namespace hilo {

// One operation of a batch: what it asks and, once run, what it got.
struct PostgresRangeStore::Request : GroupCommit::Operation {
  enum class Kind {
    kAllocate,
    kReturn,
    kSetFloor,
    kPut,
    kDelete,
    kGet,
    kList,
    kProbe,  // counts the rows; on the read connection
    kRenew   // on the write connection: renews the node tag's lease, if
             // any, and shows whether writes reach the database
  };
  Kind kind = Kind::kGet;
  std::string name;  // the collection; for kList, the name to list after
  int64_t size = 0, floor = 0, end = 0, last = 0;
  int64_t max_floor_jump = kNoFloorJumpLimit;
  uint64_t token = 0;
  int limit = 0;
  CollectionState put;  // for kPut

  bool writes() const {
    return kind == Kind::kAllocate || kind == Kind::kReturn ||
           kind == Kind::kSetFloor || kind == Kind::kPut ||
           kind == Kind::kDelete;
  }

  // Results.
  Allocation allocation;
  ReturnOutcome returned;
  FloorOutcome floored;
  CollectionState deleted;
  std::optional<CollectionState> state;
  std::vector<NamedCollectionState> rows;
  int64_t count = 0;  // kProbe: rows in the table
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_REQUEST_H_
