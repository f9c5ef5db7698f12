// The PostgreSQL store's batch runner: runs one GroupCommit batch on a
// connection in two pipelined round trips (see postgres_range_store.h),
// retrying it on the conflicts postgres_retry_policy.h names. Here are the
// run's frame (RunBatchOnce) and its first and last steps, reading the rows
// and writing them; taking the creation locks is in
// postgres_creation_locks.cc, judging the requests in
// postgres_request_judging.cc.
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
#include "service/store/postgres/postgres_batch.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_node_tag.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/postgres/postgres_retry_policy.h"
#include "service/store/postgres/postgres_row_codec.h"

namespace hilo {

using internal::AddRow;
using internal::InList;
using internal::kColumns;
using internal::PostgresConnection;
using internal::Result;
using internal::Statement;

void PostgresRangeStore::SetReachable(const Link& link, bool reachable) {
  // Only the write connection's state counts; see reachable().
  if (&link != &writer_) return;
  if (reachable_.exchange(reachable) != reachable && options_.on_reachability) {
    options_.on_reachability(reachable);
  }
}

absl::Status PostgresRangeStore::UnreplicatedCommitError(
    absl::string_view warning) const {
  // The transaction stays committed on this database, and the next batch
  // reads its rows, so nothing it did is handed out again; but a failover
  // may lose it, so none of it is reported applied.
  return absl::UnavailableError(absl::StrFormat(
      "committing on PostgreSQL at %s: %s; the commit may be lost if the "
      "database fails over, so nothing is reported applied",
      description_, warning));
}

void PostgresRangeStore::LostConnection(Link& link) {
  link.broken = true;
  SetReachable(link, false);
}

absl::Status PostgresRangeStore::EnsureConnected(Link& link) {
  if (link.connection != nullptr && link.connection->ok() && !link.broken) {
    return absl::OkStatus();
  }
  link.connection.reset();
  link.broken = false;
  absl::StatusOr<std::unique_ptr<PostgresConnection>> connection = Connect();
  if (!connection.ok()) {
    SetReachable(link, false);
    return connection.status();
  }
  if (&link == &writer_) {
    // A new write connection may have reached another database (a promoted
    // standby): nothing is written on it before its history is checked.
    if (absl::Status s = CheckHistoryOn(**connection); !s.ok()) {
      SetReachable(link, false);
      return s;
    }
  }
  link.connection = *std::move(connection);
  return absl::OkStatus();
}

void PostgresRangeStore::RunBatch(
    Link& link, absl::Span<GroupCommit::Operation* const> ops) {
  std::vector<Request*> batch;
  batch.reserve(ops.size());
  for (GroupCommit::Operation* op : ops) {
    batch.push_back(static_cast<Request*>(op));
  }
  RunAttempts(link, ops);
  // What callers see of a database error is a short reason and its code:
  // the detail names the database (host, port, user) and quotes it, and
  // goes to on_database_error, for the server's log, once per batch.
  std::string reported;
  for (Request* r : batch) {
    if (r->status.ok() ||
        !absl::StrContains(r->status.message(), description_)) {
      continue;
    }
    if (r->status.message() != reported) {
      reported = std::string(r->status.message());
      if (options_.on_database_error) options_.on_database_error(r->status);
    }
    r->status = internal::ForClients(r->status);
  }
}

void PostgresRangeStore::RunAttempts(
    Link& link, absl::Span<GroupCommit::Operation* const> ops) {
  std::vector<Request*> batch;
  batch.reserve(ops.size());
  bool reads = false;
  for (GroupCommit::Operation* op : ops) {
    batch.push_back(static_cast<Request*>(op));
    const Request::Kind kind = batch.back()->kind;
    reads |= kind == Request::Kind::kGet || kind == Request::Kind::kList;
  }
  if (reads && options_.before_read_batch_for_testing) {
    options_.before_read_batch_for_testing();
  }
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (attempt > 1) conflict_retries_.fetch_add(1, std::memory_order_relaxed);
    if (absl::Status s = EnsureConnected(link); !s.ok()) {
      for (Request* r : batch) r->status = s;
      return;
    }
    if (RunBatchOnce(link, batch) == Attempt::kDone) {
      // Operations on rows another session held locked ran not at all:
      // they try again in a later batch, after a short wait.
      for (Request* r : batch) {
        if (r->deferred) Park(r->TakeForRetry(), r->postponed);
      }
      return;
    }
  }
  for (Request* r : batch) {
    r->status =
        internal::ConflictsExhaustedError(description_, options_.max_attempts);
  }
}

PostgresRangeStore::Attempt PostgresRangeStore::RunBatchOnce(
    Link& link, absl::Span<Request* const> requests) {
  // Each attempt starts from nothing: no result of an earlier one survives.
  for (Request* r : requests) {
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
  Batch batch(link, requests);
  if (std::optional<Attempt> ended = ReadRows(batch)) return *ended;
  if (std::optional<Attempt> ended = TakeCreationLocks(batch)) return *ended;
  if (std::optional<Attempt> ended = ReadRetired(batch)) return *ended;
  if (std::optional<Attempt> ended = LockCount(batch)) return *ended;
  JudgeRequests(batch);
  if (!batch.any_write && batch.counted.has_value()) {
    if (options_.before_count_stored_for_testing) {
      options_.before_count_stored_for_testing();
    }
    StoreCountIfCurrent(*batch.counted, *batch.counted_at);
  }
  return WriteAndCommit(batch);
}

PostgresRangeStore::Attempt PostgresRangeStore::FailBatch(Batch& batch,
                                                          absl::Status s,
                                                          bool writes_only) {
  Link& link = batch.link;
  PostgresConnection& c = *link.connection;
  // The database did not answer in time (and may still be committing), or
  // its lock table is full (issue 36 item 4: any role that may connect
  // can fill it): not a server to send calls to until a commit goes
  // through again.
  if (c.stalled() || internal::IsLockTableFull(s)) SetReachable(link, false);
  if (!link.broken && (!c.ok() || (c.InTransaction() &&
                                   !c.Exec("ROLLBACK", "rolling back").ok()))) {
    LostConnection(link);
  }
  for (Request* r : batch.requests) {
    r->deferred = false;  // it fails with the batch
    if (!writes_only || r->writes()) {
      r->status = s;
    } else if (r->kind == Request::Kind::kGet) {
      // Nothing of the batch is stored: answer what is.
      auto it = batch.rows.find(r->name);
      r->state = it != batch.rows.end() ? it->second.stored : std::nullopt;
    }
  }
  return Attempt::kDone;
}

PostgresRangeStore::Attempt PostgresRangeStore::RetryBatch(
    Batch& batch, const absl::Status& conflict) {
  FailBatch(batch, internal::RetryLostConnectionError(description_, conflict),
            /*writes_only=*/false);
  return batch.link.broken ? Attempt::kDone : Attempt::kRetry;
}

std::optional<PostgresRangeStore::Attempt> PostgresRangeStore::ReadRows(
    Batch& batch) {
  Link& link = batch.link;
  PostgresConnection& c = *link.connection;
  std::map<std::string, Batch::Row>& rows = batch.rows;
  // Phase one: begin, lock and read the rows written, read the rest.
  std::vector<std::string> written, read;
  for (Request* r : batch.requests) {
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
  int locked_at = -1, read_at = -1, existing_at = -1;
  if (!written.empty()) {
    // Never waits for a row lock: a row another session holds (a server
    // frozen inside its transaction, say) is skipped, and only the
    // operations on it wait, in later batches, while the others go on.
    locked_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(written, &s.params),
                         " ORDER BY name FOR UPDATE SKIP LOCKED");
    first.push_back(std::move(s));
    // Which of them exist: one that exists and was skipped is locked.
    existing_at = static_cast<int>(first.size());
    Statement e;
    e.sql = absl::StrCat("SELECT name FROM hilo_collections WHERE name ",
                         InList(written, &e.params));
    first.push_back(std::move(e));
  }
  if (!read.empty()) {
    read_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(read, &s.params));
    first.push_back(std::move(s));
  }
  batch.list_at.assign(batch.requests.size(), -1);
  int renew_at = -1;  // the node tag's renewal, once per batch
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    Request* r = batch.requests[i];
    if (r->kind == Request::Kind::kList) {
      batch.list_at[i] = static_cast<int>(first.size());
      Statement s;
      s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                           "name > ", s.params.Next());
      s.params.Bytes(r->name);
      absl::StrAppend(&s.sql, " ORDER BY name LIMIT ", s.params.Next());
      s.params.Int32(r->limit);
      first.push_back(std::move(s));
    } else if (r->kind == Request::Kind::kProbe) {
      if (!batch.counted_at.has_value()) {
        base::MutexLock lock(&count_mu_);
        batch.counted_at = count_sequence_;
      }
      batch.list_at[i] = static_cast<int>(first.size());
      first.push_back({"SELECT count(*)::BIGINT FROM hilo_collections", {}});
    } else if (r->kind == Request::Kind::kRenew) {
      if (!batch.lock_probed) {
        // A creation needs a slot of the shared lock table, which any role
        // that may connect can fill (SQLSTATE 53200): the probe takes one
        // too, so the store is unreachable (health NOT_SERVING) while it
        // is full, not only after a creation failed. The key is a creation
        // lock's of a name no collection has (a zero byte).
        batch.lock_probed = true;
        first.push_back(
            {absl::StrCat("SELECT pg_try_advisory_xact_lock(",
                          internal::CreationLockKey("'\\x00'::bytea"), ")"),
             {}});
      }
      if (renew_at < 0 && !node_tag_.empty() && !node_tag_lost_) {
        renew_at = static_cast<int>(first.size());
        first.push_back(
            internal::RenewNodeTag(node_tag_, *options_.node_tag_lease));
      }
    }
  }
  // A batch that only reads ends here.
  if (!batch.any_write) first.push_back({"COMMIT", {}});

  std::vector<Result>& results = batch.results;
  c.TakeWarning();
  if (absl::Status s = c.Pipeline(first, &results); !s.ok()) {
    // Results may be left unread: the connection is out of step for good.
    LostConnection(link);
    return FailBatch(batch, s, /*writes_only=*/false);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ExecStatusType status = PQresultStatus(results[i].get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) continue;
    if (internal::IsRetryableConflict(results[i].get())) {
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
      SetReachable(link, false);
      return FailBatch(batch, UnreplicatedCommitError(warning),
                       /*writes_only=*/false);
    }
    SetReachable(link, true);
  }
  if (renew_at >= 0) {
    if (std::optional<std::string> holder = internal::NodeTagTakenBy(
            c, results[renew_at].get(), node_tag_, *options_.node_tag_lease)) {
      NodeTagLost(*holder);
    }
  }

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
  return std::nullopt;
}

PostgresRangeStore::Attempt PostgresRangeStore::WriteAndCommit(Batch& batch) {
  Link& link = batch.link;
  PostgresConnection& c = *link.connection;
  // Phase two: write what changed and commit.
  Statement insert, update;
  std::string inserted, updated;
  std::vector<std::string> deleted;
  int64_t created = 0;  // less the rows deleted
  for (const auto& [name, row] : batch.rows) {
    if (!row.dirty) continue;
    if (!row.now.has_value()) {
      // Deleted; a row the batch created and deleted was never stored.
      if (row.stored.has_value()) {
        deleted.push_back(name);
        --created;
      }
    } else if (row.stored.has_value()) {
      AddRow(name, *row.now, row.ceiling, &update.params, &updated);
    } else {
      if (batch.may_create.count(name) == 0) {
        // Only under its creation lock (see above), or this batch could
        // wait on a row another session is inserting.
        return FailBatch(batch,
                         absl::InternalError(absl::StrFormat(
                             "collection \"%s\" would be created without its "
                             "creation lock; nothing was changed",
                             name)),
                         /*writes_only=*/false);
      }
      AddRow(name, *row.now, row.ceiling, &insert.params, &inserted);
      ++created;
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
  WriteRetired(batch, &second);  // retirement: postgres_retirement.cc
  WriteCount(batch, &second);    // postgres_collection_count.cc
  if (batch.any_write) {
    // Bounded like every statement (see PostgresConnection): a COMMIT
    // cancelled while it waits for a synchronous standby still answers
    // COMMIT, with only a warning that it is local; the warning fails the
    // writes below.
    second.push_back({"COMMIT", {}});
  }

  if (!second.empty()) {
    // From here until this attempt ends, rows may be created or deleted:
    // a probe that counts meanwhile must not store what it saw.
    if (created != 0) ChangeCountSequence();
    absl::Cleanup count_settled = [&] {
      if (created != 0) ChangeCountSequence();
    };
    const absl::Time commit_start = absl::Now();
    c.TakeWarning();
    std::vector<Result> results;
    absl::Status sent =
        c.Pipeline(second, &results, options_.after_commit_sent_for_testing);
    // Until a commit goes through again, this server is not one to send
    // calls to (health NOT_SERVING); the next probe tries again.
    absl::Cleanup commit_failed = [&] { SetReachable(link, false); };
    if (!sent.ok()) {
      LostConnection(link);
      // Perhaps during COMMIT: whether it applied is unknown, so nothing
      // may be reported applied. Reads were answered before it.
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
      if (status == PGRES_FATAL_ERROR && internal::IsRetryableConflict(r)) {
        std::move(commit_failed).Cancel();  // a conflict, not a failure
        return RetryBatch(batch, c.Error(r, "writing collections"));
      }
      return FailBatch(
          batch,
          status == PGRES_FATAL_ERROR
              ? c.Error(r, commit ? "committing" : "writing collections")
              : absl::UnavailableError(absl::StrFormat(
                    "committing on PostgreSQL at %s: the transaction "
                    "was rolled back",
                    description_)),
          /*writes_only=*/true);
    }
    if (std::string warning = c.TakeWarning(); !warning.empty()) {
      return FailBatch(batch, UnreplicatedCommitError(warning),
                       /*writes_only=*/true);
    }
    std::move(commit_failed).Cancel();
    SetReachable(link, true);
    const absl::Duration commit_time = absl::Now() - commit_start;
    // A probe's count runs on the read connection, never in a batch that
    // writes (StoreCountIfCurrent stores it): here the count only moves.
    collection_count_.fetch_add(created, std::memory_order_relaxed);
    if (options_.on_commit) {
      options_.on_commit(commit_time, static_cast<int>(batch.requests.size()),
                         collection_count_.load(std::memory_order_relaxed));
    }
    if (&link == &writer_) ConfirmReservations(batch);
  }
  return Attempt::kDone;
}

}  // namespace hilo
