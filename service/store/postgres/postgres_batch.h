// PostgresBatch: what the steps of one run of a batch (PostgresBatchRunner:
// read the rows, take the creation locks, judge each request, write and
// commit) share, and the rows the judges (postgres_judges.h) change. Lives
// for one attempt, on the committer thread of the batch's queue. Private to
// service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/postgres/postgres_row_codec.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// Most rows one transaction creates; see PostgresBatchRunner::
// TakeCreationLocks.
inline constexpr size_t kMaxCreationsPerBatch = 64;

struct PostgresBatch {
  explicit PostgresBatch(absl::Span<PostgresRequest* const> requests)
      : requests(requests) {}

  const absl::Span<PostgresRequest* const> requests;

  // A collection's row as stored before the batch, and as the batch leaves
  // it so far; dirty once the batch changed it.
  struct Row {
    std::optional<CollectionState> stored;
    std::optional<CollectionState> now;
    bool dirty = false;
    // Read under the row lock (so the batch may write it), not only read.
    bool locked = false;
    // The ceiling (postgres_history.h) as stored, and as the batch leaves
    // it; never lower.
    int64_t stored_ceiling = 0;
    int64_t ceiling = 0;
    // Which making of the name the row is (ReadIncarnation): as stored, or
    // for a row the batch inserts, drawn by Writes.
    int64_t incarnation = 0;
    // Retirement (postgres_retirement.cc): the Max the name was retired at
    // (ReadRetired, for a row the batch may create; or as the batch retired
    // it), which a new row starts from; `retired` once the batch retired
    // the row, whose Max and ceiling are then kept in hilo_retired.
    int64_t retired_max = 0;
    bool retired = false;
  };
  // Records a row read from `result` (kColumns order); `locked` if read
  // under its row lock.
  void Read(const PGresult* result, int i, bool locked);
  // The rows the batch writes or reads, as far as read (ReadRows, then
  // TakeCreationLocks); a name with no entry has no row, or is held.
  std::map<std::string, Row> rows;
  // Whether any request writes: then the first round trip leaves the
  // transaction open and WriteAndCommit ends it.
  bool any_write = false;
  // The run took its probe of the lock table (kRenew).
  bool lock_probed = false;

  // The first round trip's results (ReadRows); list_at[i] is the index of
  // requests[i]'s List or probe result in it, or -1.
  std::vector<internal::Result> results;
  std::vector<int> list_at;
  // The count's sequence (PostgresCollectionCount) before the probe's
  // count(*) was sent, if one was; and the rows it counted, once judged.
  std::optional<int64_t> counted_at;
  std::optional<int64_t> counted;

  // Rows another session holds locked (or, for creating_elsewhere, is
  // creating): not read, not written; the operations on them are set aside.
  std::set<std::string> held;
  std::set<std::string> creating_elsewhere;
  // For a creation the rules refuse on no row: the Max its name was
  // retired at, if it was (ReadRetiredOfRefusals), read before the creation
  // locks only to choose them.
  std::map<std::string, int64_t> retired_before_locks;
  // New rows this batch holds the creation lock of, so may insert.
  std::set<std::string> may_create;
  // New rows past the batch's share of creations: their operations run
  // again at once, in the next batch.
  std::set<std::string> postponed;
  // Some request's reply waits until the standbys confirm the commit (a
  // range or floor above this server's confirmed reservation).
  bool awaits_standbys = false;
};

inline void PostgresBatch::Read(const PGresult* result, int i, bool locked) {
  NamedCollectionState read = ReadRow(result, i);
  Row& row = rows[read.name];
  row.stored = read.state;
  row.now = read.state;
  row.locked = locked;
  row.stored_ceiling = ReadCeiling(result, i);
  row.ceiling = row.stored_ceiling;
  row.incarnation = ReadIncarnation(result, i);
}

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_H_
