// The PostgreSQL store's retirement of collections (RangeStore::RetireAsync):
// three small steps of a batch's run, each hooked in with one line:
//   - ReadRetired, in RunBatchOnce right after TakeCreationLocks: the Max
//     and ceiling each name the batch may create was retired at;
//   - JudgeRetire, in JudgeRequests (a kDelete with `retire`);
//   - WriteRetired, in WriteAndCommit before its COMMIT.
//
// Table hilo_retired holds, per retired name, the highest number it handed
// out (RetiredMax) and its ceiling (postgres_history.h). A new row of the
// name starts from StartAfterRetirement(max) with that ceiling, so its
// first range is above every number the name ever handed out, and a
// failover that loses the new row's commits still finds a ceiling at least
// as high as any other server's confirmed reservation of the name.
//
// Why reading the retired Max after the creation lock is enough: the batch
// that retires a row holds its row lock until it commits, so a batch that
// would create the name either sees the row (locked: it waits) or runs its
// statements after the retirement committed, and then reads its entry.
#include <libpq-fe.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/collection_rules.h"
#include "service/store/postgres/postgres_batch.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"

namespace hilo {

using internal::InList;
using internal::PostgresConnection;
using internal::ReadInt64;
using internal::Result;
using internal::Statement;

std::optional<PostgresRangeStore::Attempt> PostgresRangeStore::ReadRetired(
    Batch& batch) {
  if (batch.may_create.empty()) return std::nullopt;
  PostgresConnection& c = *batch.link.connection;
  const std::vector<std::string> names(batch.may_create.begin(),
                                       batch.may_create.end());
  Statement s;
  s.sql =
      absl::StrCat("SELECT name, max, ceiling FROM hilo_retired WHERE name ",
                   InList(names, &s.params));
  std::vector<Statement> statements;
  statements.push_back(std::move(s));
  std::vector<Result> results;
  if (absl::Status sent = c.Pipeline(statements, &results); !sent.ok()) {
    LostConnection(batch.link);
    return FailBatch(batch, sent, /*writes_only=*/false);
  }
  const PGresult* r = results[0].get();
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    if (internal::IsRetryableConflict(r)) {
      return RetryBatch(batch, c.Error(r, "reading retired collections"));
    }
    return FailBatch(batch, c.Error(r, "reading retired collections"),
                     /*writes_only=*/false);
  }
  for (int i = 0; i < PQntuples(r); ++i) {
    Batch::Row& row =
        batch.rows[std::string(PQgetvalue(r, i, 0), PQgetlength(r, i, 0))];
    row.retired_max = ReadInt64(r, i, 1);
    row.ceiling = std::max(row.ceiling, ReadInt64(r, i, 2));
  }
  return std::nullopt;
}

void PostgresRangeStore::JudgeRetire(Request& r, Batch& batch) {
  Batch::Row& row = batch.rows[r.name];
  if (!row.now.has_value()) {
    r.status = absl::NotFoundError(absl::StrFormat(
        "collection \"%s\" has no row; there is nothing to retire", r.name));
    return;
  }
  r.deleted = *row.now;
  row.retired_max = std::max(row.retired_max, RetiredMax(*row.now));
  row.retired = true;
  row.now.reset();
  row.dirty = true;
}

void PostgresRangeStore::WriteRetired(Batch& batch,
                                      std::vector<Statement>* statements) {
  Statement upsert;
  std::string values;
  for (const auto& [name, row] : batch.rows) {
    if (!row.retired) continue;
    absl::StrAppend(&values, values.empty() ? "(" : ", (",
                    upsert.params.Next());
    upsert.params.Bytes(name);
    absl::StrAppend(&values, ", ", upsert.params.Next());
    upsert.params.Int64(row.retired_max);
    absl::StrAppend(&values, ", ", upsert.params.Next(), ")");
    upsert.params.Int64(row.ceiling);
  }
  if (values.empty()) return;
  // A name retired again keeps the higher of each.
  upsert.sql = absl::StrCat(
      "INSERT INTO hilo_retired (name, max, ceiling) VALUES ", values,
      " ON CONFLICT (name) DO UPDATE SET "
      "max = GREATEST(hilo_retired.max, excluded.max), "
      "ceiling = GREATEST(hilo_retired.ceiling, excluded.ceiling)");
  statements->push_back(std::move(upsert));
}

}  // namespace hilo
