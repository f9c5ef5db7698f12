// PostgresBatchRunner's frame (Run, the attempts, failing and retrying a
// batch) and its first and last steps, reading the rows and writing them;
// taking the creation locks is in postgres_creation_locks.cc, the
// reservations in postgres_reservations.cc, retirement in
// postgres_retirement.cc, the count of rows for every server in
// postgres_fleet_count.cc.
#include "service/store/postgres/postgres_batch_runner.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/base/monotonic_clock.h"
#include "service/store/postgres/postgres_history.h"
#include "service/store/postgres/postgres_judges.h"
#include "service/store/postgres/postgres_node_tag.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"

namespace hilo {
namespace internal {

PostgresBatchRunner::PostgresBatchRunner(Options options, Hooks hooks)
    : options_(std::move(options)),
      hooks_(std::move(hooks)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      windows_clock_(options_.windows_clock != nullptr
                         ? options_.windows_clock
                         : MonotonicClock::Get()) {}

absl::Status PostgresBatchRunner::Adopt(
    std::unique_ptr<PostgresConnection> connection) {
  // Whatever database a new connection reaches, no reservation is known
  // to be on its standbys yet.
  confirmed_ceiling_.clear();
  standbys_expected_.clear();
  fewer_since_.reset();
  left_.clear();
  if (options_.reserves) {
    // The standbys streaming now are counted from the start: one that
    // leaves before this connection's first wait confirms nothing either.
    absl::StatusOr<StandbySet> listed = ListStandbys(*connection);
    if (!listed.ok()) return listed.status();
    standbys_expected_ = *std::move(listed);
  }
  connection_ = std::move(connection);
  broken_ = false;
  return absl::OkStatus();
}

PostgresConnection* PostgresBatchRunner::healthy_connection() {
  if (broken_ || connection_ == nullptr || !connection_->ok()) return nullptr;
  return connection_.get();
}

PostgresBatchRunner::Counters PostgresBatchRunner::counters() const {
  return {set_aside_.load(std::memory_order_relaxed),
          creations_set_aside_.load(std::memory_order_relaxed),
          locked_failures_.load(std::memory_order_relaxed),
          conflict_retries_.load(std::memory_order_relaxed),
          standby_waits_.load(std::memory_order_relaxed)};
}

void PostgresBatchRunner::SetReachable(bool reachable) {
  if (hooks_.reachable) hooks_.reachable(reachable);
}

absl::Status PostgresBatchRunner::UnreplicatedCommitError(
    absl::string_view warning) const {
  // The transaction stays committed on this database, and the next batch
  // reads its rows, so nothing it did is handed out again; but a failover
  // may lose it, so none of it is reported applied.
  return absl::UnavailableError(absl::StrFormat(
      "committing on PostgreSQL at %s: %s; the commit may be lost if the "
      "database fails over, so nothing is reported applied",
      options_.description, warning));
}

void PostgresBatchRunner::LostConnection() {
  broken_ = true;
  SetReachable(false);
}

absl::Status PostgresBatchRunner::EnsureConnected() {
  if (healthy_connection() != nullptr) return absl::OkStatus();
  connection_.reset();
  broken_ = false;
  absl::StatusOr<std::unique_ptr<PostgresConnection>> connection =
      hooks_.connect();
  absl::Status adopted =
      connection.ok() ? Adopt(*std::move(connection)) : connection.status();
  if (!adopted.ok()) SetReachable(false);
  return adopted;
}

void PostgresBatchRunner::Run(absl::Span<GroupCommit::Operation* const> ops) {
  std::vector<PostgresRequest*> batch;
  batch.reserve(ops.size());
  for (GroupCommit::Operation* op : ops) {
    batch.push_back(static_cast<PostgresRequest*>(op));
  }
  RunAttempts(batch);
  // What callers see of a database error is a short reason and its code:
  // the detail names the database (host, port, user) and quotes it, and
  // goes to on_database_error, for the server's log, once per batch.
  std::string reported;
  for (PostgresRequest* r : batch) {
    if (r->status.ok() ||
        !absl::StrContains(r->status.message(), options_.description)) {
      continue;
    }
    if (r->status.message() != reported) {
      reported = std::string(r->status.message());
      if (options_.on_database_error) {
        options_.on_database_error(r->status);
      }
    }
    r->status = ForClients(r->status);
  }
}

void PostgresBatchRunner::RunAttempts(
    absl::Span<PostgresRequest* const> batch) {
  bool reads = false;
  for (PostgresRequest* r : batch) {
    reads |= r->kind == PostgresRequest::Kind::kGet ||
             r->kind == PostgresRequest::Kind::kList;
  }
  if (reads && options_.before_read_batch_for_testing) {
    options_.before_read_batch_for_testing();
  }
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (attempt > 1) conflict_retries_.fetch_add(1, std::memory_order_relaxed);
    if (absl::Status s = EnsureConnected(); !s.ok()) {
      for (PostgresRequest* r : batch) r->status = s;
      return;
    }
    if (RunOnce(batch) == Attempt::kDone) {
      // Operations on rows another session held locked ran not at all:
      // they try again in a later batch, after a short wait.
      for (PostgresRequest* r : batch) {
        if (r->deferred) hooks_.park(r->TakeForRetry(), r->postponed);
      }
      return;
    }
  }
  for (PostgresRequest* r : batch) {
    r->status =
        ConflictsExhaustedError(options_.description, options_.max_attempts);
  }
}

PostgresBatchRunner::Attempt PostgresBatchRunner::RunOnce(
    absl::Span<PostgresRequest* const> requests) {
  // Each attempt starts from nothing: no result of an earlier one survives.
  for (PostgresRequest* r : requests) {
    r->status = absl::OkStatus();
    r->allocation = Allocation{};
    r->returned = ReturnOutcome{};
    r->floored = FloorOutcome{};
    r->deleted = CollectionState{};
    r->state.reset();
    r->rows.clear();
    r->count = 0;
    r->many.clear();
    r->deferred = false;
    r->postponed = false;
    r->awaits_standbys = false;
  }
  PostgresBatch batch(requests);
  if (std::optional<Attempt> ended = ReadRows(batch)) return *ended;
  if (std::optional<Attempt> ended = ReadRetiredOfRefusals(batch)) {
    return *ended;
  }
  if (std::optional<Attempt> ended = TakeCreationLocks(batch)) return *ended;
  if (std::optional<Attempt> ended = ReadRetired(batch)) return *ended;
  if (std::optional<Attempt> ended = LockFleetCount(batch)) return *ended;
  if (options_.before_judging_for_testing) {
    options_.before_judging_for_testing();
  }
  JudgeRequests(batch);
  if (!batch.any_write && batch.counted.has_value()) {
    if (options_.before_count_stored_for_testing) {
      options_.before_count_stored_for_testing();
    }
    hooks_.count->StoreIfCurrent(*batch.counted, *batch.counted_at);
  }
  return WriteAndCommit(batch);
}

PostgresBatchRunner::Attempt PostgresBatchRunner::FailBatch(
    PostgresBatch& batch, absl::Status s, bool writes_only) {
  PostgresConnection& c = *connection_;
  // The database did not answer in time (and may still be committing), or
  // its lock table is full (issue 36 item 4: any role that may connect
  // can fill it): not a server to send calls to until a commit goes
  // through again.
  if (c.stalled() || IsLockTableFull(s)) SetReachable(false);
  if (!broken_ && (!c.ok() || (c.InTransaction() &&
                               !c.Exec("ROLLBACK", "rolling back").ok()))) {
    LostConnection();
  }
  for (PostgresRequest* r : batch.requests) {
    r->deferred = false;  // it fails with the batch
    if (!writes_only || r->writes()) {
      r->status = s;
    } else if (r->kind == PostgresRequest::Kind::kGet) {
      // Nothing of the batch is stored: answer what is.
      auto it = batch.rows.find(r->name);
      r->state = it != batch.rows.end() ? it->second.stored : std::nullopt;
    }
  }
  return Attempt::kDone;
}

PostgresBatchRunner::Attempt PostgresBatchRunner::RetryBatch(
    PostgresBatch& batch, const absl::Status& conflict) {
  FailBatch(batch, RetryLostConnectionError(options_.description, conflict),
            /*writes_only=*/false);
  return broken_ ? Attempt::kDone : Attempt::kRetry;
}

std::vector<Statement> PostgresBatchRunner::FirstRoundTrip(PostgresBatch& batch,
                                                           int* locked_at,
                                                           int* read_at,
                                                           int* existing_at,
                                                           int* renew_at) {
  // Phase one: begin, lock and read the rows written, read the rest.
  std::vector<std::string> written, read;
  for (PostgresRequest* r : batch.requests) {
    r->Rows(&written, &read);
    batch.any_write |= r->writes();
  }
  std::sort(written.begin(), written.end());
  written.erase(std::unique(written.begin(), written.end()), written.end());
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  read.erase(std::remove_if(read.begin(), read.end(),
                            [&](const std::string& name) {
                              return std::binary_search(written.begin(),
                                                        written.end(), name);
                            }),
             read.end());

  std::vector<Statement> first;
  first.push_back({"BEGIN ISOLATION LEVEL READ COMMITTED", {}});
  if (!written.empty()) {
    // Never waits for a row lock: a row another session holds (a server
    // frozen inside its transaction, say) is skipped, and only the
    // operations on it wait, in later batches, while the others go on.
    *locked_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(written, &s.params),
                         " ORDER BY name FOR UPDATE SKIP LOCKED");
    first.push_back(std::move(s));
    // Which of them exist: one that exists and was skipped is locked.
    *existing_at = static_cast<int>(first.size());
    Statement e;
    e.sql = absl::StrCat("SELECT name FROM hilo_collections WHERE name ",
                         InList(written, &e.params));
    first.push_back(std::move(e));
  }
  if (!read.empty()) {
    *read_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(read, &s.params));
    first.push_back(std::move(s));
  }
  batch.list_at.assign(batch.requests.size(), -1);
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    PostgresRequest* r = batch.requests[i];
    if (r->kind == PostgresRequest::Kind::kList) {
      batch.list_at[i] = static_cast<int>(first.size());
      Statement s;
      s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                           "name > ", s.params.Next());
      s.params.Bytes(r->name);
      absl::StrAppend(&s.sql, " ORDER BY name LIMIT ", s.params.Next());
      s.params.Int32(r->limit);
      first.push_back(std::move(s));
    } else if (r->kind == PostgresRequest::Kind::kProbe) {
      if (!batch.counted_at.has_value()) {
        batch.counted_at = hooks_.count->Sequence();
      }
      batch.list_at[i] = static_cast<int>(first.size());
      first.push_back({"SELECT count(*)::BIGINT FROM hilo_collections", {}});
    } else if (r->kind == PostgresRequest::Kind::kRenew) {
      if (!batch.lock_probed) {
        // A creation needs a slot of the shared lock table, which any role
        // that may connect can fill (SQLSTATE 53200): the probe takes one
        // too, so the store is unreachable (health NOT_SERVING) while it
        // is full, not only after a creation failed. The key is a creation
        // lock's of a name no collection has (a zero byte).
        batch.lock_probed = true;
        first.push_back({absl::StrCat("SELECT pg_try_advisory_xact_lock(",
                                      CreationLockKey("'\\x00'::bytea"), ")"),
                         {}});
      }
      // The node tag's renewal, once per batch.
      if (*renew_at < 0 && hooks_.renewal) {
        if (std::optional<Statement> renew = hooks_.renewal()) {
          *renew_at = static_cast<int>(first.size());
          first.push_back(*std::move(renew));
        }
      }
    }
  }
  // A batch that only reads ends here.
  if (!batch.any_write) first.push_back({"COMMIT", {}});
  return first;
}

std::optional<PostgresBatchRunner::Attempt> PostgresBatchRunner::ReadRows(
    PostgresBatch& batch) {
  PostgresConnection& c = *connection_;
  int locked_at = -1, read_at = -1, existing_at = -1, renew_at = -1;
  std::vector<Statement> first =
      FirstRoundTrip(batch, &locked_at, &read_at, &existing_at, &renew_at);
  std::vector<Result>& results = batch.results;
  c.TakeWarning();
  if (absl::Status s = c.Pipeline(first, &results); !s.ok()) {
    // Results may be left unread: the connection is out of step for good.
    LostConnection();
    return FailBatch(batch, s, /*writes_only=*/false);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ExecStatusType status = PQresultStatus(results[i].get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) continue;
    if (IsRetryableConflict(results[i].get())) {
      return RetryBatch(batch,
                        c.Error(results[i].get(), "reading collections"));
    }
    return FailBatch(
        batch,
        c.Error(results[i].get(),
                i == 0 ? "beginning a transaction" : "reading collections"),
        /*writes_only=*/false);
  }
  if (!batch.any_write) {
    // This COMMIT ended the transaction: one that wrote (the renewal) and
    // warns was cancelled waiting for a synchronous standby, as below.
    if (std::string warning = c.TakeWarning(); !warning.empty()) {
      SetReachable(false);
      return FailBatch(batch, UnreplicatedCommitError(warning),
                       /*writes_only=*/false);
    }
    SetReachable(true);
  }
  if (renew_at >= 0) hooks_.renewed(c, results[renew_at].get());
  TakeRowsRead(batch, locked_at, read_at, existing_at);
  return std::nullopt;
}

void PostgresBatchRunner::TakeRowsRead(PostgresBatch& batch, int locked_at,
                                       int read_at, int existing_at) {
  std::map<std::string, PostgresBatch::Row>& rows = batch.rows;
  const std::vector<Result>& results = batch.results;
  // The rows as stored, then as the batch leaves them.
  for (int at : {locked_at, read_at}) {
    if (at < 0) continue;
    const PGresult* r = results[at].get();
    for (int i = 0; i < PQntuples(r); ++i) batch.Read(r, i, at == locked_at);
  }
  // Rows another session holds locked: not read, not written.
  std::set<std::string> held;
  if (existing_at >= 0) {
    const PGresult* r = results[existing_at].get();
    for (int i = 0; i < PQntuples(r); ++i) {
      std::string name(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
      if (rows.find(name) == rows.end()) held.insert(std::move(name));
    }
  }
  batch.held = std::move(held);
}

void PostgresBatchRunner::JudgeRequests(PostgresBatch& batch) {
  const auto steady_now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    // Refused before judging (LockFleetCount).
    if (!batch.requests[i]->status.ok()) continue;
    if (AnswerRead(batch, i)) continue;
    PostgresRequest& r = *batch.requests[i];
    if (SetAside(batch, r, steady_now)) continue;
    Judge(batch, r);
  }
}

bool PostgresBatchRunner::AnswerRead(PostgresBatch& batch, size_t i) {
  PostgresRequest& r = *batch.requests[i];
  if (batch.list_at[i] >= 0) {
    const PGresult* result = batch.results[batch.list_at[i]].get();
    if (r.kind == PostgresRequest::Kind::kProbe) {
      r.count = ReadInt64(result, 0, 0);
      batch.counted = r.count;
      return true;
    }
    r.rows.clear();
    for (int j = 0; j < PQntuples(result); ++j) {
      r.rows.push_back(ReadRow(result, j));
    }
    return true;
  }
  if (r.kind == PostgresRequest::Kind::kGet) {
    // As the batch leaves it so far (as stored, if the commit fails).
    r.state = JudgeGet(batch, r.name);
    return true;
  }
  return r.kind == PostgresRequest::Kind::kRenew;  // answered in ReadRows
}

bool PostgresBatchRunner::SetAside(
    PostgresBatch& batch, PostgresRequest& r,
    std::chrono::steady_clock::time_point steady_now) {
  std::vector<std::string> writes_to, reads;
  r.Rows(&writes_to, &reads);
  auto any_in = [&](const std::set<std::string>& names) {
    return std::any_of(
        writes_to.begin(), writes_to.end(),
        [&](const std::string& name) { return names.count(name) > 0; });
  };
  const bool postponed = any_in(batch.postponed);
  if (!postponed && !any_in(batch.held)) return false;
  if (!r.lock_deadline.has_value()) {
    r.lock_deadline =
        steady_now + absl::ToChronoMilliseconds(options_.lock_timeout);
  }
  const bool creating = batch.creating_elsewhere.count(r.name) > 0;
  if (postponed) {
    // Nobody holds it: only the batch's share of creations is used up.
    // Its deadline orders it before newer creations next time, and ends
    // the wait if new names keep coming faster than they are created.
    if (steady_now < *r.lock_deadline) {
      r.deferred = true;
      r.postponed = true;
    } else {
      r.status = absl::UnavailableError(absl::StrFormat(
          "collection \"%s\" was not created within %s: more new "
          "collections are being created than the store creates per "
          "commit (%d); nothing was changed",
          r.name, absl::FormatDuration(options_.lock_timeout),
          kMaxCreationsPerBatch));
    }
    return true;
  }
  if (steady_now < *r.lock_deadline) {
    r.deferred = true;
    set_aside_.fetch_add(1, std::memory_order_relaxed);
    if (creating) creations_set_aside_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // Waited long enough: fails, but for the items of a ReturnMany on rows
  // this batch holds, which its judge answers.
  if (r.kind == PostgresRequest::Kind::kReturnMany) return false;
  locked_failures_.fetch_add(1, std::memory_order_relaxed);
  r.status = LockedRowError(r.name, creating, options_.lock_timeout);
  return true;
}

void PostgresBatchRunner::Judge(PostgresBatch& batch, PostgresRequest& r) {
  const absl::Time now = clock_->Now();
  switch (r.kind) {
    case PostgresRequest::Kind::kAllocate:
      r.status = JudgeAllocate(batch, r.name, r.size, r.floor, r.max_floor_jump,
                               r.token, now, r.may_create, &r.allocation);
      if (r.status.ok() && options_.reserves) {
        Reserve(batch, r, r.name, r.allocation.range.high, r.size);
      }
      break;
    case PostgresRequest::Kind::kReturn:
      r.status =
          JudgeReturn(batch, r.name, r.end, r.last, r.token, now, &r.returned);
      break;
    case PostgresRequest::Kind::kReturnMany: {
      const int locked =
          JudgeReturnMany(batch, r.items, now, options_.lock_timeout, &r.many);
      locked_failures_.fetch_add(locked, std::memory_order_relaxed);
      break;
    }
    case PostgresRequest::Kind::kSetFloor:
      r.status = JudgeSetFloor(batch, r.name, r.floor, now, &r.floored);
      // A floor is a promise that no number up to it is handed out: one
      // lost with the history would break it.
      if (r.status.ok() && r.floored.raised && options_.reserves) {
        Reserve(batch, r, r.name, batch.rows[r.name].now->max, 1);
      }
      break;
    case PostgresRequest::Kind::kPut:
      r.status = JudgePut(batch, r.name, r.put);
      break;
    case PostgresRequest::Kind::kDelete:
      r.status = r.retire ? JudgeRetire(batch, r.name, &r.deleted)
                          : JudgeDelete(batch, r.name, &r.deleted);
      break;
    default:
      break;
  }
}

absl::StatusOr<std::vector<Statement>> PostgresBatchRunner::Writes(
    PostgresBatch& batch, int64_t* created) const {
  // Phase two: write what changed and commit.
  Statement insert, update;
  std::string inserted, updated;
  std::vector<std::string> deleted;
  for (auto& [name, row] : batch.rows) {
    if (!row.dirty) continue;
    if (!row.now.has_value()) {
      // Deleted; a row the batch created and deleted was never stored.
      if (row.stored.has_value()) {
        deleted.push_back(name);
        --*created;
      }
    } else if (row.stored.has_value()) {
      // The row goes on (ON CONFLICT keeps its incarnation), even one the
      // batch deleted and made again: its ceiling never went down.
      AddRow(name, *row.now, row.ceiling, row.incarnation, &update.params,
             &updated);
    } else {
      if (batch.may_create.count(name) == 0) {
        // Only under its creation lock (see above), or this batch could
        // wait on a row another session is inserting.
        return absl::InternalError(absl::StrFormat(
            "collection \"%s\" would be created without its creation lock; "
            "nothing was changed",
            name));
      }
      // Every path that makes a row (a range, a floor, a Put on a new
      // name) ends here.
      row.incarnation = NewIncarnation();
      AddRow(name, *row.now, row.ceiling, row.incarnation, &insert.params,
             &inserted);
      ++*created;
    }
  }
  std::vector<Statement> second;
  if (!inserted.empty()) {
    // No ON CONFLICT: a row another server created meanwhile fails the
    // batch, which then runs again on that row.
    insert.sql = absl::StrCat("INSERT INTO hilo_collections (", kColumns,
                              ") VALUES ", inserted);
    second.push_back(std::move(insert));
  }
  if (!updated.empty()) {
    // Rows this transaction holds locked: the conflict is certain.
    update.sql = absl::StrCat(
        "INSERT INTO hilo_collections (", kColumns, ") VALUES ", updated,
        " ON CONFLICT (name) DO UPDATE SET max = excluded.max, "
        "return_floor = excluded.return_floor, "
        "updated_at_us = excluded.updated_at_us, "
        "range_token = excluded.range_token, "
        "previous_token = excluded.previous_token, "
        "previous_return_floor = excluded.previous_return_floor, "
        "ceiling = GREATEST(hilo_collections.ceiling, excluded.ceiling)");
    second.push_back(std::move(update));
  }
  if (!deleted.empty()) {
    // Rows this transaction holds locked: no other server can use them
    // between the rule's check and the delete.
    Statement remove;
    remove.sql = absl::StrCat("DELETE FROM hilo_collections WHERE name ",
                              InList(deleted, &remove.params));
    second.push_back(std::move(remove));
  }
  WriteRetired(batch, &second);
  WriteFleetCount(*created, &second);
  if (batch.any_write) {
    // Bounded like every statement (see PostgresConnection): a COMMIT
    // cancelled while it waits for a synchronous standby still answers
    // COMMIT, with only a warning that it is local; the warning fails the
    // writes below.
    second.push_back({"COMMIT", {}});
  }
  return second;
}

PostgresBatchRunner::Attempt PostgresBatchRunner::WriteAndCommit(
    PostgresBatch& batch) {
  int64_t created = 0;  // less the rows deleted
  absl::StatusOr<std::vector<Statement>> second = Writes(batch, &created);
  if (!second.ok()) {
    return FailBatch(batch, second.status(), /*writes_only=*/false);
  }
  if (second->empty()) return Attempt::kDone;
  // From here until this attempt ends, rows may be created or deleted: a
  // probe that counts meanwhile must not store what it saw.
  if (created != 0) hooks_.count->ChangeBegins();
  absl::Cleanup count_settled = [&] {
    if (created != 0) hooks_.count->ChangeEnds();
  };
  return Commit(batch, *second, created);
}

PostgresBatchRunner::Attempt PostgresBatchRunner::Commit(
    PostgresBatch& batch, std::vector<Statement>& second, int64_t created) {
  PostgresConnection& c = *connection_;
  const absl::Time commit_start = absl::Now();
  c.TakeWarning();
  std::vector<Result> results;
  absl::Status sent =
      c.Pipeline(second, &results, options_.after_commit_sent_for_testing);
  // Until a commit goes through again, this server is not one to send
  // calls to (health NOT_SERVING); the next probe tries again.
  absl::Cleanup commit_failed = [&] { SetReachable(false); };
  if (!sent.ok()) {
    LostConnection();
    // Perhaps during COMMIT: whether it applied is unknown, so nothing may
    // be reported applied. Reads were answered before it.
    return FailBatch(batch,
                     absl::UnavailableError(absl::StrCat(
                         sent.message(),
                         "; the outcome of the commit is unknown, nothing is "
                         "reported applied")),
                     /*writes_only=*/true);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    PGresult* r = results[i].get();
    const ExecStatusType status = PQresultStatus(r);
    const bool commit = i + 1 == results.size();
    // COMMIT of a transaction that failed answers ROLLBACK.
    if (status == PGRES_COMMAND_OK &&
        (!commit || std::strcmp(PQcmdStatus(r), "COMMIT") == 0)) {
      continue;
    }
    if (status == PGRES_FATAL_ERROR && IsRetryableConflict(r)) {
      std::move(commit_failed).Cancel();  // a conflict, not a failure
      return RetryBatch(batch, c.Error(r, "writing collections"));
    }
    return FailBatch(
        batch,
        status == PGRES_FATAL_ERROR
            ? c.Error(r, commit ? "committing" : "writing collections")
            : absl::UnavailableError(absl::StrFormat(
                  "committing on PostgreSQL at %s: the transaction was "
                  "rolled back",
                  options_.description)),
        /*writes_only=*/true);
  }
  if (std::string warning = c.TakeWarning(); !warning.empty()) {
    return FailBatch(batch, UnreplicatedCommitError(warning),
                     /*writes_only=*/true);
  }
  std::move(commit_failed).Cancel();
  SetReachable(true);
  const absl::Duration commit_time = absl::Now() - commit_start;
  // A probe's count runs on the read connection, never in a batch that
  // writes (StoreIfCurrent stores it): here the count only moves.
  hooks_.count->Add(created);
  if (options_.on_commit) {
    options_.on_commit(commit_time, static_cast<int>(batch.requests.size()),
                       hooks_.count->Load());
  }
  if (options_.reserves) ConfirmReservations(batch);
  return Attempt::kDone;
}

}  // namespace internal
}  // namespace hilo
