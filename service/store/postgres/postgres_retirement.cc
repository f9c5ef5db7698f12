// PostgresBatchRunner's part in retiring collections (RangeStore::
// RetireAsync), small steps of a batch's run:
//   - ReadRetiredOfRefusals, in RunOnce before TakeCreationLocks, only for
//     a creation the rules refuse on no row (CreatesRowWhenNone): the Max
//     its name was retired at, from which it may be accepted, so that it
//     takes its creation lock after all;
//   - ReadRetired, in RunOnce right after TakeCreationLocks: the Max and
//     ceiling each name the batch may create was retired at;
//   - JudgeRetire (postgres_judges.h), for a kDelete with `retire`;
//   - WriteRetired, in Writes before the COMMIT.
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
// ReadRetiredOfRefusals' read, before the lock, only decides whether to
// take it: a retirement committed between that read and the lock can only
// raise the Max (hilo_retired keeps the higher), and the request is judged
// on ReadRetired's.
#include <libpq-fe.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/store/postgres/postgres_batch_runner.h"
#include "service/store/postgres/postgres_judges.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"

namespace hilo {
namespace internal {

std::optional<PostgresBatchRunner::Attempt> PostgresBatchRunner::QueryRetired(
    PostgresBatch& batch, const std::set<std::string>& names, Result* out) {
  PostgresConnection& c = *connection_;
  const std::vector<std::string> listed(names.begin(), names.end());
  Statement s;
  s.sql =
      absl::StrCat("SELECT name, max, ceiling FROM hilo_retired WHERE name ",
                   InList(listed, &s.params));
  std::vector<Statement> statements;
  statements.push_back(std::move(s));
  std::vector<Result> results;
  if (absl::Status sent = c.Pipeline(statements, &results); !sent.ok()) {
    LostConnection();
    return FailBatch(batch, sent, /*writes_only=*/false);
  }
  const PGresult* r = results[0].get();
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    if (IsRetryableConflict(r)) {
      return RetryBatch(batch, c.Error(r, "reading retired collections"));
    }
    return FailBatch(batch, c.Error(r, "reading retired collections"),
                     /*writes_only=*/false);
  }
  *out = std::move(results[0]);
  return std::nullopt;
}

std::optional<PostgresBatchRunner::Attempt>
PostgresBatchRunner::ReadRetiredOfRefusals(PostgresBatch& batch) {
  std::set<std::string> names;
  for (const PostgresRequest* r : batch.requests) {
    if (r->creates() && !CreatesRowWhenNone(*r) &&
        batch.rows.find(r->name) == batch.rows.end() &&
        batch.held.count(r->name) == 0) {
      names.insert(r->name);
    }
  }
  if (names.empty()) return std::nullopt;
  Result result;
  if (std::optional<Attempt> ended = QueryRetired(batch, names, &result)) {
    return ended;
  }
  const PGresult* r = result.get();
  for (int i = 0; i < PQntuples(r); ++i) {
    batch.retired_before_locks[std::string(
        PQgetvalue(r, i, 0), PQgetlength(r, i, 0))] = ReadInt64(r, i, 1);
  }
  return std::nullopt;
}

std::optional<PostgresBatchRunner::Attempt> PostgresBatchRunner::ReadRetired(
    PostgresBatch& batch) {
  // A creation refused on its name's retired Max, which took no lock: its
  // refusal names that Max.
  for (const auto& [name, max] : batch.retired_before_locks) {
    if (batch.may_create.count(name) == 0 &&
        batch.rows.find(name) == batch.rows.end() &&
        batch.held.count(name) == 0) {
      batch.rows[name].retired_max = max;
    }
  }
  if (batch.may_create.empty()) return std::nullopt;
  Result result;
  if (std::optional<Attempt> ended =
          QueryRetired(batch, batch.may_create, &result)) {
    return ended;
  }
  const PGresult* r = result.get();
  for (int i = 0; i < PQntuples(r); ++i) {
    PostgresBatch::Row& row =
        batch.rows[std::string(PQgetvalue(r, i, 0), PQgetlength(r, i, 0))];
    row.retired_max = ReadInt64(r, i, 1);
    row.ceiling = std::max(row.ceiling, ReadInt64(r, i, 2));
  }
  return std::nullopt;
}

void PostgresBatchRunner::WriteRetired(const PostgresBatch& batch,
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

}  // namespace internal
}  // namespace hilo
