#include "service/store/sqlite/sqlite_batch_writer.h"

#include <sqlite3.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/sqlite/sqlite_file.h"
#include "service/store/sqlite/sqlite_row_codec.h"
#include "service/store/sqlite/sqlite_statement.h"

namespace hilo {
namespace internal {
namespace {

struct Finalize {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, Finalize>;

constexpr char kUpsertRow[] =
    "INSERT INTO collections(name, max, return_floor, updated_at_us, "
    "range_token, previous_token, previous_return_floor, ceiling) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(name) DO UPDATE SET "
    "max=excluded.max, return_floor=excluded.return_floor, "
    "updated_at_us=excluded.updated_at_us, "
    "range_token=excluded.range_token, "
    "previous_token=excluded.previous_token, "
    "previous_return_floor=excluded.previous_return_floor, "
    "ceiling=excluded.ceiling";

// Keeps the higher Max: a name retired again never goes down.
constexpr char kUpsertRetired[] =
    "INSERT INTO retired_collections(name, max) VALUES(?1, ?2) "
    "ON CONFLICT(name) DO UPDATE SET max=MAX(max, excluded.max)";

}  // namespace

// Prepared once: they skip SQLite's parser, a measurable share of a batch.
struct SqliteBatchWriter::Statements {
  Stmt begin, commit, select, upsert, remove;
  Stmt select_retired, upsert_retired;  // retired_collections
  Stmt select_ceiling;                  // reservations
};

absl::StatusOr<std::unique_ptr<SqliteBatchWriter>> SqliteBatchWriter::Create(
    sqlite3* db, Options options) {
  std::unique_ptr<SqliteBatchWriter> writer(
      new SqliteBatchWriter(db, std::move(options)));
  base::MutexLock lock(&writer->mu_);
  if (absl::Status s = writer->Prepare(); !s.ok()) return s;
  return writer;
}

SqliteBatchWriter::SqliteBatchWriter(sqlite3* db, Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      db_(db),
      // Called by Run only, which holds mu_.
      reservations_(
          [this](absl::string_view name)
              ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadCeiling(name); },
          options_.max_held_rows),
      // Called by Judge only, which holds mu_.
      rows_([this](absl::string_view name)
                ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadRow(name); },
            options_.max_held_rows,
            [this](absl::string_view name) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return ReadRetiredMax(name);
            }) {}

SqliteBatchWriter::~SqliteBatchWriter() = default;

absl::Status SqliteBatchWriter::Prepare() {
  statements_ = std::make_unique<Statements>();
  for (auto [sql, out] :
       {std::pair{"BEGIN IMMEDIATE", &statements_->begin},
        {"COMMIT", &statements_->commit},
        {kSelectRow, &statements_->select},
        {kUpsertRow, &statements_->upsert},
        {"DELETE FROM collections WHERE name=?1", &statements_->remove},
        {"SELECT max FROM retired_collections WHERE name=?1",
         &statements_->select_retired},
        {kUpsertRetired, &statements_->upsert_retired},
        {"SELECT ceiling FROM collections WHERE name=?1",
         &statements_->select_ceiling}}) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                      &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return SqliteError(db_, rc, "preparing a statement", options_.path);
    }
    out->reset(stmt);
  }
  return absl::OkStatus();
}

void SqliteBatchWriter::Run(absl::Span<GroupCommit::Operation* const> batch) {
  base::MutexLock lock(&mu_);
  if (!broken_.ok()) {
    for (GroupCommit::Operation* op : batch) op->status = broken_;
    return;
  }
  const absl::Time now = clock_->Now();
  if (!Begin(batch) || !Judge(batch, now)) return;
  const std::vector<SqliteHeldRows::Change> changes = rows_.Changes();
  absl::StatusOr<bool> wait_for_disk = reservations_.Plan(changes, now);
  if (!wait_for_disk.ok()) return Fail(batch, wait_for_disk.status());
  absl::StatusOr<int64_t> written = WriteChanges(changes);
  absl::Duration took;
  absl::Status commit = written.status();
  if (commit.ok()) commit = Commit(*wait_for_disk, &took);
  if (!commit.ok()) return Fail(batch, commit);
  rows_written_ += *written;
  if (*wait_for_disk && options_.sync == SyncMode::kFull) ++commits_synced_;
  reservations_.Commit();
  const int64_t created = rows_.Commit();
  if (options_.on_commit) {
    options_.on_commit(took, static_cast<int>(batch.size()), created);
  }
}

bool SqliteBatchWriter::Begin(absl::Span<GroupCommit::Operation* const> batch) {
  if (!sqlite3_get_autocommit(db_)) {
    // A ROLLBACK of an earlier batch failed and left its transaction open:
    // nothing of it was reported applied; end it before starting anew, or
    // every later batch would fail.
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status begin = Step(statements_->begin.get(), "\"BEGIN IMMEDIATE\"");
  if (begin.ok()) return true;
  for (GroupCommit::Operation* op : batch) op->status = begin;
  return false;
}

bool SqliteBatchWriter::Judge(absl::Span<GroupCommit::Operation* const> batch,
                              absl::Time now) {
  for (size_t i = 0; i < batch.size(); ++i) {
    auto* write = static_cast<Write*>(batch[i]);
    write->status = write->judge(rows_, now);
    if (sqlite3_get_autocommit(db_)) {
      // SQLite ended the transaction while reading a row (some I/O errors
      // do): nothing of the batch is applied, and no more may be judged on
      // rows it may have read since.
      const absl::Status lost =
          !write->status.ok()
              ? write->status
              : absl::UnavailableError(absl::StrFormat(
                    "transaction on database %s ended unexpectedly",
                    options_.path));
      for (size_t j = i; j < batch.size(); ++j) batch[j]->status = lost;
      Fail(batch, lost);
      return false;
    }
  }
  return true;
}

absl::StatusOr<int64_t> SqliteBatchWriter::WriteChanges(
    const std::vector<SqliteHeldRows::Change>& changes) {
  int64_t written = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    const SqliteHeldRows::Change& change = changes[i];
    if (options_.before_write_for_testing) {
      if (absl::Status s = options_.before_write_for_testing(); !s.ok()) {
        return s;
      }
    }
    absl::Status s =
        change.row->has_value()
            ? WriteRow(change.name, **change.row, reservations_.ceiling(i))
            : DeleteRow(change.name);
    if (s.ok() && change.retired_max.has_value()) {
      s = WriteRetired(change.name, *change.retired_max);
    }
    if (!s.ok()) return s;
    ++written;
  }
  return written;
}

absl::Status SqliteBatchWriter::WriteRow(absl::string_view name,
                                         const CollectionState& row,
                                         int64_t ceiling) {
  sqlite3_stmt* stmt = statements_->upsert.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  BindCollectionColumns(stmt, 2, row);
  sqlite3_bind_int64(stmt, 8, ceiling);
  return Step(stmt, absl::StrCat("writing collection \"", name, "\""));
}

absl::Status SqliteBatchWriter::DeleteRow(absl::string_view name) {
  sqlite3_stmt* stmt = statements_->remove.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  return Step(stmt, absl::StrCat("deleting collection \"", name, "\""));
}

absl::Status SqliteBatchWriter::WriteRetired(absl::string_view name,
                                             int64_t max) {
  sqlite3_stmt* stmt = statements_->upsert_retired.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, max);
  return Step(stmt, absl::StrCat("retiring collection \"", name, "\""));
}

absl::StatusOr<int64_t> SqliteBatchWriter::ReadRetiredMax(
    absl::string_view name) {
  sqlite3_stmt* stmt = statements_->select_retired.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  const int64_t max = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(
        db_, rc, absl::StrCat("reading retired collection \"", name, "\""),
        options_.path);
  }
  return max;
}

absl::StatusOr<int64_t> SqliteBatchWriter::ReadCeiling(absl::string_view name) {
  sqlite3_stmt* stmt = statements_->select_ceiling.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  const int64_t ceiling = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(
        db_, rc,
        absl::StrCat("reading the ceiling of collection \"", name, "\""),
        options_.path);
  }
  return ceiling;
}

absl::StatusOr<std::optional<CollectionState>> SqliteBatchWriter::ReadRow(
    absl::string_view name) {
  sqlite3_stmt* stmt = statements_->select.get();
  sqlite3_bind_text(stmt, 1, name.data(), static_cast<int>(name.size()),
                    SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  std::optional<CollectionState> row;
  if (rc == SQLITE_ROW) row = ReadCollectionColumns(stmt, 0);
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(db_, rc,
                       absl::StrCat("reading collection \"", name, "\""),
                       options_.path);
  }
  return row;
}

absl::Status SqliteBatchWriter::Commit(bool wait_for_disk,
                                       absl::Duration* took) {
  absl::Status commit;
  if (options_.before_commit_for_testing) {
    commit = options_.before_commit_for_testing();
  }
  // The last moment before the batch becomes durable, and its ranges are
  // handed out: are they written to the file the next start opens?
  if (commit.ok() && options_.check_file) commit = options_.check_file();
  const absl::Time start = absl::Now();
  if (commit.ok()) commit = Step(statements_->commit.get(), "\"COMMIT\"");
  if (commit.ok() && wait_for_disk && options_.sync == SyncMode::kFull) {
    commit = SyncLog();
  }
  *took = absl::Now() - start;
  return commit;
}

absl::Status SqliteBatchWriter::SyncLog() {
  // The connection commits with synchronous=NORMAL (FULL only on a file
  // without powersafe overwrite): the log is written, not flushed. SQLite
  // cannot change that inside a transaction (tests/sqlite_power_cut_test.cc),
  // and whether a batch must wait is known only once it is judged; so a COMMIT
  // that must wait is followed by a sync of the log through SQLite's own file
  // (its VFS, which also flushes the directory of a new log), before any
  // completion runs. It covers every commit before it: the log is written in
  // order.
  sqlite3_file* log = nullptr;
  int rc =
      sqlite3_file_control(db_, "main", SQLITE_FCNTL_JOURNAL_POINTER, &log);
  if (rc == SQLITE_OK && (log == nullptr || log->pMethods == nullptr)) {
    rc = SQLITE_IOERR_FSYNC;
  }
  if (rc == SQLITE_OK) rc = log->pMethods->xSync(log, SQLITE_SYNC_NORMAL);
  if (rc == SQLITE_OK) return absl::OkStatus();
  // The batch is in the log but perhaps not on disk, and after a failed
  // flush the kernel may report the next one done without the pages this
  // one lost: no later range may rely on the file, so every later batch
  // fails too, until the server restarts.
  broken_ = absl::UnavailableError(absl::StrFormat(
      "flushing the write-ahead log of database %s to disk failed (%s); "
      "restart the server",
      options_.path, sqlite3_errstr(rc)));
  return broken_;
}

void SqliteBatchWriter::Fail(absl::Span<GroupCommit::Operation* const> batch,
                             const absl::Status& status) {
  if (!sqlite3_get_autocommit(db_)) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  reservations_.Abort();
  rows_.Abort();
  for (GroupCommit::Operation* op : batch) {
    if (op->status.ok()) op->status = status;
  }
}

absl::Status SqliteBatchWriter::Step(sqlite3_stmt* stmt,
                                     absl::string_view what) {
  const int rc = sqlite3_step(stmt);
  absl::Status status;
  if (rc != SQLITE_DONE) {
    status = SqliteError(db_, rc, what, options_.path);
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  return status;
}

int64_t SqliteBatchWriter::rows_written() const {
  base::MutexLock lock(&mu_);
  return rows_written_;
}

bool SqliteBatchWriter::broken() const {
  base::MutexLock lock(&mu_);
  return !broken_.ok();
}

int64_t SqliteBatchWriter::commits_synced() const {
  base::MutexLock lock(&mu_);
  return commits_synced_;
}

size_t SqliteBatchWriter::rows_held() const {
  base::MutexLock lock(&mu_);
  return rows_.size();
}

}  // namespace internal
}  // namespace hilo
