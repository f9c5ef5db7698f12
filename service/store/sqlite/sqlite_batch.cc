// SqliteRangeStore's batch runner: one transaction per batch, a savepoint
// per operation, and the rule that no operation is reported applied unless
// the COMMIT that holds it succeeded.
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/sqlite/sqlite_file.h"
#include "service/store/sqlite/sqlite_file_guard.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "service/store/sqlite/sqlite_statement.h"

namespace hilo {

absl::Status SqliteRangeStore::Error(int rc, absl::string_view what) const {
  return ErrorOn(db_, rc, what);
}

absl::Status SqliteRangeStore::ErrorOn(sqlite3* db, int rc,
                                       absl::string_view what) const {
  return internal::SqliteError(db, rc, what, options_.path);
}

absl::Status SqliteRangeStore::Exec(const char* sql) {
  return internal::SqliteExec(db_, sql, options_.path);
}

absl::Status SqliteRangeStore::Step(Statement& statement) {
  const int rc = sqlite3_step(statement.get());
  absl::Status status;
  if (rc != SQLITE_DONE) {
    status = Error(rc, absl::StrCat("\"", sqlite3_sql(statement.get()), "\""));
  }
  statement.Reset();
  return status;
}

void SqliteRangeStore::RunBatch(
    absl::Span<GroupCommit::Operation* const> batch) {
  RunBatchInTransaction(batch);
}

bool SqliteRangeStore::RunBatchInTransaction(
    absl::Span<GroupCommit::Operation* const> batch) {
  if (!sqlite3_get_autocommit(db_)) {
    // A ROLLBACK of an earlier batch failed and left its transaction open:
    // nothing of it was reported applied; end it before starting anew, or
    // every later batch would fail, and reads would see its writes.
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status begin = Exec("BEGIN IMMEDIATE");
  if (!begin.ok()) {
    for (GroupCommit::Operation* op : batch) op->status = begin;
    return false;
  }
  bool released_failed = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    GroupCommit::Operation* op = batch[i];
    absl::Status s = Step(*savepoint_);
    if (s.ok()) {
      s = op->body(*op);
      if (!s.ok()) {
        // Undo this operation alone. If SQLite already rolled back the
        // whole transaction (some I/O errors do), the batch is lost below.
        if (!sqlite3_get_autocommit(db_)) {
          Step(*rollback_to_).IgnoreError();
        }
      }
    }
    if (sqlite3_get_autocommit(db_)) {
      // The transaction is gone: nothing in this batch was applied.
      const absl::Status lost =
          s.ok() ? absl::UnavailableError(absl::StrFormat(
                       "transaction on database %s ended unexpectedly",
                       options_.path))
                 : s;
      for (size_t j = 0; j < batch.size(); ++j) {
        if (j == i) {
          batch[j]->status = s.ok() ? lost : s;
        } else if (j > i || batch[j]->status.ok()) {
          batch[j]->status = lost;
        }
      }
      return false;
    }
    if (s.ok() && options_.before_release_for_testing) {
      s = options_.before_release_for_testing();
      if (!s.ok()) released_failed = true;
    }
    if (!released_failed) {
      if (absl::Status r = Step(*release_); !r.ok()) {
        s = r;
        released_failed = true;
      }
    }
    if (released_failed) {
      // Whether this operation's writes are still part of the transaction is
      // unknown: fail the whole batch rather than report it failed and then
      // commit it.
      if (!sqlite3_get_autocommit(db_)) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      for (GroupCommit::Operation* each : batch) each->status = s;
      return false;
    }
    op->status = s;
  }
  absl::Status commit;
  if (options_.before_commit_for_testing) {
    commit = options_.before_commit_for_testing();
  }
  // The last moment before the batch becomes durable, and its ranges are
  // handed out: are they written to the file the next start opens?
  if (commit.ok() && guard_ != nullptr) commit = guard_->Check();
  const absl::Time commit_start = absl::Now();
  if (commit.ok()) commit = Exec("COMMIT");
  const absl::Duration commit_time = absl::Now() - commit_start;
  if (!commit.ok()) {
    if (!sqlite3_get_autocommit(db_)) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    for (GroupCommit::Operation* op : batch) {
      if (op->status.ok()) op->status = commit;
    }
    return false;
  }
  int64_t created = 0;
  for (GroupCommit::Operation* op : batch) {
    if (op->status.ok()) created += op->rows_created;
  }
  collection_count_.fetch_add(created, std::memory_order_relaxed);
  if (options_.on_commit) {
    options_.on_commit(commit_time, static_cast<int>(batch.size()),
                       collection_count_.load(std::memory_order_relaxed));
  }
  return true;
}

}  // namespace hilo
