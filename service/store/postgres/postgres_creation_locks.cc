// PostgresBatchRunner's creation locks: the step of a batch's run that
// chooses which new collections the batch may create, takes their creation
// locks without waiting, and reads those rows again. See "Creating a
// collection" in README.md.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/store/postgres/postgres_batch_runner.h"
#include "service/store/postgres/postgres_judges.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"

namespace hilo {
namespace internal {

std::vector<std::string> PostgresBatchRunner::ChooseCreations(
    PostgresBatch& batch) const {
  // Creating a row: a row another session has inserted but not committed
  // is invisible here, and an INSERT of the same name would wait for that
  // session (lock_timeout) with the whole batch behind it. So every hilo
  // server inserts a row only while it holds the name's creation lock
  // (CreationLockKey), taken without waiting: a name whose lock another
  // session holds is being created there, and the operations on it are set
  // aside like those on a held row, while the rest of the batch goes on.
  //
  // Advisory locks take slots of the database's shared lock table
  // (max_locks_per_transaction per session on average): a burst of new
  // collections is created a bounded number per transaction, the rest in
  // the batches right after. The oldest go first: those postponed before
  // (by when they were first postponed), then this batch's in arrival
  // order, so no flood of new names, whatever they sort as, keeps one
  // creation waiting for more than a few batches.
  //
  // A creation the rules refuse on its own arguments, judged on no row,
  // takes no lock (CreatesRowWhenNone): the key of a creation shows in
  // pg_locks while it is held, and any role that may connect and saw it
  // could hold it later against that name (docs/security.md); a refused
  // request should show nothing. A retired name's is judged on the row it
  // would start from (ReadRetiredOfRefusals), where it may be accepted.
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<Clock::time_point, std::string>> by_age;
  for (PostgresRequest* r : batch.requests) {
    // A retired name's new row starts from its retired Max: judged there.
    auto retired = batch.retired_before_locks.find(r->name);
    if (CreatesRowWhenNone(*r, retired != batch.retired_before_locks.end()
                                   ? retired->second
                                   : 0) &&
        batch.rows.find(r->name) == batch.rows.end() &&
        batch.held.count(r->name) == 0) {
      by_age.emplace_back(r->lock_deadline.value_or(Clock::time_point::max()),
                          r->name);
    }
  }
  std::stable_sort(
      by_age.begin(), by_age.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> creating;
  std::set<std::string> seen;
  for (auto& [age, name] : by_age) {
    if (!seen.insert(name).second) continue;
    if (creating.size() < kMaxCreationsPerBatch) {
      creating.push_back(std::move(name));
    } else {
      batch.postponed.insert(std::move(name));
    }
  }
  std::sort(creating.begin(), creating.end());
  return creating;
}

std::optional<PostgresBatchRunner::Attempt>
PostgresBatchRunner::TakeCreationLocks(PostgresBatch& batch) {
  PostgresConnection& c = *connection_;
  const std::vector<std::string> creating = ChooseCreations(batch);
  if (!creating.empty()) {
    std::vector<Statement> locking;
    Statement lock;
    std::vector<std::string> values;
    for (const std::string& name : creating) {
      values.push_back(absl::StrCat("(", lock.params.Next(), ")"));
      lock.params.Bytes(name);
    }
    lock.sql = absl::StrCat("SELECT v.name, pg_try_advisory_xact_lock(",
                            CreationLockKey("v.name"), ") FROM (VALUES ",
                            absl::StrJoin(values, ", "), ") AS v(name)");
    locking.push_back(std::move(lock));
    // Read again once the lock is held: a session that held it may have
    // committed the row meanwhile, which is then an existing row.
    Statement again;
    again.sql =
        absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE name ",
                     InList(creating, &again.params),
                     " ORDER BY name FOR UPDATE SKIP LOCKED");
    locking.push_back(std::move(again));
    Statement exists;
    exists.sql = absl::StrCat("SELECT name FROM hilo_collections WHERE name ",
                              InList(creating, &exists.params));
    locking.push_back(std::move(exists));
    std::vector<Result> locked;
    if (absl::Status s = c.Pipeline(locking, &locked); !s.ok()) {
      LostConnection();
      return FailBatch(batch, s, /*writes_only=*/false);
    }
    for (const Result& result : locked) {
      const ExecStatusType status = PQresultStatus(result.get());
      if (status == PGRES_TUPLES_OK) continue;
      if (internal::IsRetryableConflict(result.get())) {
        return RetryBatch(batch,
                          c.Error(result.get(), "locking new collections"));
      }
      return FailBatch(batch, c.Error(result.get(), "locking new collections"),
                       /*writes_only=*/false);
    }
    for (int i = 0; i < PQntuples(locked[1].get()); ++i) {
      batch.Read(locked[1].get(), i, /*locked=*/true);
    }
    for (int i = 0; i < PQntuples(locked[2].get()); ++i) {
      std::string name(PQgetvalue(locked[2].get(), i, 0),
                       PQgetlength(locked[2].get(), i, 0));
      if (batch.rows.find(name) == batch.rows.end()) {
        batch.held.insert(std::move(name));
      }
    }
    const PGresult* granted = locked[0].get();
    for (int i = 0; i < PQntuples(granted); ++i) {
      std::string name(PQgetvalue(granted, i, 0), PQgetlength(granted, i, 0));
      if (batch.rows.find(name) != batch.rows.end() ||
          batch.held.count(name) > 0) {
        continue;
      }
      if (PQgetvalue(granted, i, 1)[0] != 0) {
        batch.may_create.insert(std::move(name));
      } else {
        batch.creating_elsewhere.insert(name);
        batch.held.insert(std::move(name));
      }
    }
  }
  return std::nullopt;
}

}  // namespace internal
}  // namespace hilo
