// PostgresBatchRunner's count of collections for every server sharing the
// database (issue 36 item 5: two servers with --max_collections=50 created
// 100 rows); not to be confused with PostgresCollectionCount
// (postgres_collection_count.h), what this server knows of the count for
// its metrics and health. Two small steps of a batch's run:
//   - LockFleetCount, in RunOnce after ReadRetired: a batch that would
//     create or delete (or retire) rows locks the count (the one row of
//     hilo_collection_count, FOR UPDATE SKIP LOCKED) and, on a server with
//     max_collections, refuses the creations past the limit
//     (StoreFullRefusal);
//   - WriteFleetCount, in Writes before the COMMIT: moves the count by the
//     rows the batch created less those it deleted.
//
// The row lock is held until the batch commits, so the batches that create
// or delete rows take turns across the fleet, each seeing the count every
// earlier one left: the limit holds whatever the number of servers. No one
// waits for the lock: a batch that finds it held sets its creations and
// deletions aside (as for a row another session holds; they run again in a
// later batch, for at most lock_timeout), and the rest of it goes on. A
// batch that only writes existing rows (NextRange, ReturnRange on a
// collection that has a row) never touches the count.
//
// The count is made again from count(*) at every server's start, under the
// schema lock (postgres_schema.cc), so a count an older server left behind
// is put right by the next start.
#include <libpq-fe.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "service/store/postgres/postgres_batch_runner.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

std::optional<PostgresBatchRunner::Attempt> PostgresBatchRunner::LockFleetCount(
    PostgresBatch& batch) {
  // Deletions (and retirements) of rows the batch holds move the count too.
  std::set<std::string> deleting;
  for (PostgresRequest* request : batch.requests) {
    if (request->kind == PostgresRequest::Kind::kDelete &&
        batch.rows.count(request->name) > 0) {
      deleting.insert(request->name);
    }
  }
  if (batch.may_create.empty() && deleting.empty()) return std::nullopt;
  PostgresConnection& c = *connection_;
  std::vector<Statement> statements;
  // Never waits: a count another server holds (a batch of its own that
  // creates or deletes rows, or a server frozen inside one) sets this
  // batch's creations and deletions aside, like rows another session holds,
  // while the rest of the batch goes on.
  statements.push_back(
      {"SELECT rows FROM hilo_collection_count FOR UPDATE SKIP LOCKED", {}});
  statements.push_back({"SELECT count(*) FROM hilo_collection_count", {}});
  std::vector<Result> results;
  if (absl::Status sent = c.Pipeline(statements, &results); !sent.ok()) {
    LostConnection();
    return FailBatch(batch, sent, /*writes_only=*/false);
  }
  for (const Result& result : results) {
    const PGresult* r = result.get();
    if (PQresultStatus(r) == PGRES_TUPLES_OK) continue;
    if (IsRetryableConflict(r)) {
      return RetryBatch(batch, c.Error(r, "locking the collection count"));
    }
    return FailBatch(batch, c.Error(r, "locking the collection count"),
                     /*writes_only=*/false);
  }
  if (ReadInt64(results[1].get(), 0, 0) != 1) {
    return FailBatch(
        batch,
        absl::InternalError("table hilo_collection_count does not hold one "
                            "count; nothing was changed"),
        /*writes_only=*/false);
  }
  if (PQntuples(results[0].get()) == 0) {
    for (const std::string& name : batch.may_create) {
      batch.creating_elsewhere.insert(name);
      batch.held.insert(name);
    }
    batch.may_create.clear();
    batch.held.insert(deleting.begin(), deleting.end());
    return std::nullopt;
  }
  const int64_t max = options_.max_collections;
  if (max > 0) Admit(batch, max - ReadInt64(results[0].get(), 0, 0));
  return std::nullopt;
}

void PostgresBatchRunner::Admit(PostgresBatch& batch, int64_t room) const {
  const int64_t max = options_.max_collections;
  // The new rows, in the order their requests came, while they fit; a row
  // only PutForTesting creates is not held to the limit.
  std::set<std::string> admitted, refused;
  for (PostgresRequest* request : batch.requests) {
    if (!request->creates() || request->kind == PostgresRequest::Kind::kPut ||
        batch.may_create.count(request->name) == 0 ||
        admitted.count(request->name) > 0) {
      continue;
    }
    if (room > 0) {
      admitted.insert(request->name);
      --room;
    } else {
      refused.insert(request->name);
    }
  }
  for (PostgresRequest* request : batch.requests) {
    if (request->creates() && refused.count(request->name) > 0) {
      request->status = StoreFullRefusal(request->name, max);
    }
  }
  for (const std::string& name : refused) batch.may_create.erase(name);
}

void PostgresBatchRunner::WriteFleetCount(int64_t created,
                                          std::vector<Statement>* statements) {
  if (created == 0) return;
  Statement update;
  update.sql = "UPDATE hilo_collection_count SET rows = rows + ";
  update.sql += update.params.Next();
  update.params.Int64(created);
  statements->push_back(std::move(update));
}

}  // namespace internal
}  // namespace hilo
