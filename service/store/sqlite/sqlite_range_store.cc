#include "service/store/sqlite/sqlite_range_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/collection_rules.h"
#include "service/store/sqlite/sqlite_file.h"
#include "service/store/sqlite/sqlite_file_guard.h"
#include "service/store/sqlite/sqlite_schema.h"
#include "service/store/sqlite/sqlite_statement.h"
#include "service/store/store_arguments.h"

namespace hilo {
namespace {

using internal::CreateDirectoriesDurably;
using internal::FsyncDirectory;
using internal::kSelectRow;
using internal::kSelectRows;

}  // namespace

absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "full") return SyncMode::kFull;
  if (lower == "normal") return SyncMode::kNormal;
  return absl::InvalidArgumentError(
      absl::StrCat("sync mode \"", text, "\" is unknown; use full or normal"));
}

absl::string_view SyncModeName(SyncMode mode) {
  return mode == SyncMode::kFull ? "full" : "normal";
}

absl::StatusOr<std::unique_ptr<SqliteRangeStore>> SqliteRangeStore::Open(
    SqliteRangeStoreOptions options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("database path is empty");
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  if (options.max_batches_per_lead < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max batches per lead is %d; it must be at least 1",
                        options.max_batches_per_lead));
  }
  if (options.read_only) {
    // Nothing is created: not the directory, not the file.
    const std::string path = options.path;
    if (access(path.c_str(), F_OK) != 0) {
      return absl::NotFoundError(absl::StrFormat(
          "cannot open database %s read-only: %s", path, strerror(errno)));
    }
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(
        path.c_str(), &db,
        SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
        nullptr);
    if (rc != SQLITE_OK) {
      const std::string message =
          db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      sqlite3_close(db);
      return absl::UnavailableError(absl::StrFormat(
          "cannot open database %s read-only: %s", path, message));
    }
    std::unique_ptr<SqliteRangeStore> store(
        new SqliteRangeStore(std::move(options), db));
    std::error_code ec;
    store->absolute_path_ =
        std::filesystem::absolute(path, ec).lexically_normal().string();
    {
      base::MutexLock lock(&store->writer_mu_);
      if (absl::Status s = store->InitReadOnly(); !s.ok()) return s;
    }
    if (absl::Status s = store->OpenReader(); !s.ok()) return s;
    return store;
  }
  std::error_code ec;
  const std::string absolute_path =
      std::filesystem::absolute(options.path, ec).lexically_normal().string();
  if (ec) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot resolve database path %s: %s", options.path, ec.message()));
  }
  const std::filesystem::path parent =
      std::filesystem::path(options.path).parent_path();
  const std::string path = options.path;
  const bool is_new = access(path.c_str(), F_OK) != 0;
  if (is_new && !options.create_if_missing) {
    return absl::NotFoundError(
        absl::StrFormat("database %s does not exist", absolute_path));
  }
  struct stat wal;
  if (is_new && stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) {
    // SQLite would replay the log of the database deleted here into the
    // new file: a database of half of another's pages.
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s does not exist but its write-ahead log %s-wal does: the "
        "database was deleted or moved without it. Put the database back, or "
        "remove %s-wal (and %s-shm) to start a new one",
        absolute_path, absolute_path, absolute_path, absolute_path));
  }
  if (!parent.empty()) {
    if (absl::Status s = CreateDirectoriesDurably(parent, options); !s.ok()) {
      return s;
    }
  }
  // SQLite says only "unable to open database file"; say why if we can: the
  // file, or the directory of a file yet to be made, is not writable.
  auto explain = [&](absl::Status s) {
    const std::string dir = parent.empty() ? "." : parent.string();
    const bool exists = access(path.c_str(), F_OK) == 0;
    const std::string& probe = exists ? path : dir;
    if (s.code() == absl::StatusCode::kUnavailable &&
        access(probe.c_str(), W_OK) != 0) {
      return absl::UnavailableError(absl::StrCat(
          s.message(), "; ", probe, " is not writable: ", strerror(errno)));
    }
    return s;
  };
  if (is_new) {
    if (absl::Status s = internal::CreateOwnerOnlyFile(path); !s.ok()) {
      return explain(std::move(s));
    }
  }
  // Locked before SQLite opens it: a second server on the file is refused
  // before it reads or writes anything.
  absl::StatusOr<std::unique_ptr<internal::SqliteFileGuard>> guard =
      internal::SqliteFileGuard::Acquire(absolute_path);
  if (!guard.ok()) return explain(guard.status());
  if (!options.create_if_missing && (*guard)->Size() == 0) {
    return absl::NotFoundError(absl::StrFormat(
        "database %s is an empty file, not a hilo database", absolute_path));
  }
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                          SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                      nullptr);
  if (rc != SQLITE_OK) {
    const std::string message =
        db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return explain(absl::UnavailableError(
        absl::StrFormat("cannot open database %s: %s", path, message)));
  }
  std::unique_ptr<SqliteRangeStore> store(
      new SqliteRangeStore(std::move(options), db));
  store->absolute_path_ = absolute_path;
  // Destroyed after the connections, which the store closes first.
  store->guard_ = *std::move(guard);
  {
    base::MutexLock lock(&store->writer_mu_);
    if (absl::Status s = store->Init(); !s.ok()) return explain(std::move(s));
  }
  if (absl::Status s = store->OpenReader(); !s.ok()) {
    return explain(std::move(s));
  }
  SqliteRangeStore* raw = store.get();
  // Leader mode: a commit here is a local flush (tens of microseconds on
  // an SSD), cheaper than handing the write to another thread and its
  // completion back, which is what a gRPC callback thread would otherwise
  // pay per request (see group_commit.h for the bound on how long a caller
  // may stay).
  store->queue_ = std::make_unique<GroupCommit>(
      GroupCommit::Options{
          .mode = GroupCommit::Mode::kLeader,
          .max_batch = raw->options_.max_batch,
          .max_batches_per_lead = raw->options_.max_batches_per_lead},
      [raw](absl::Span<GroupCommit::Operation* const> batch) {
        {
          base::MutexLock lock(&raw->writer_mu_);
          raw->RunBatch(batch);
        }
        // Outside the lock: the callback may take its time, or exit.
        raw->guard_->ReportIfLost();
      });
  if (is_new) {
    // The new file's directory entry, or a restart could find no database
    // and begin again at 1.
    if (absl::Status s = FsyncDirectory(parent.empty() ? "." : parent.string(),
                                        store->options_);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = store->guard_->Watch(store->options_.file_check_interval,
                                            store->options_.on_file_lost);
      !s.ok()) {
    return s;
  }
  return store;
}

SqliteRangeStore::SqliteRangeStore(SqliteRangeStoreOptions options, sqlite3* db)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      db_(db) {}

// The reading connection: read-only, with its own statements and its own
// queue (a batch of reads is just the reads, one after another).
struct SqliteRangeStore::Reader {
  ~Reader() {
    // Completes every queued read before the statements go.
    queue.reset();
    select.reset();
    list.reset();
    sqlite3_close(db);
  }

  sqlite3* db = nullptr;
  std::unique_ptr<Statement> select;
  std::unique_ptr<Statement> list;
  std::unique_ptr<GroupCommit> queue;
};

SqliteRangeStore::~SqliteRangeStore() {
  // Closing the last connection deletes the -wal file: not a lost log.
  if (guard_ != nullptr) guard_->StopWatching();
  // Completes every queued operation before the statements go.
  reader_.reset();
  queue_.reset();
  select_.reset();
  upsert_.reset();
  savepoint_.reset();
  release_.reset();
  rollback_to_.reset();
  delete_.reset();
  sqlite3_close(db_);
}

absl::Status SqliteRangeStore::Init() {
  sqlite3_busy_timeout(
      db_, static_cast<int>(absl::ToInt64Milliseconds(options_.busy_timeout)));
  // The first read of the file: a file that is not SQLite fails here.
  auto not_hilo = [&](const absl::Status& s) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s cannot be used: %s", options_.path, s.message()));
  };
  sqlite3_stmt* raw = nullptr;
  int rc =
      sqlite3_prepare_v2(db_, "PRAGMA journal_mode=WAL", -1, &raw, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_ROW) {
      const std::string mode =
          reinterpret_cast<const char*>(sqlite3_column_text(raw, 0));
      sqlite3_finalize(raw);
      if (mode != "wal") {
        return absl::FailedPreconditionError(absl::StrFormat(
            "database %s: journal mode is %s; WAL could not be enabled",
            options_.path, mode));
      }
    } else {
      sqlite3_finalize(raw);
    }
  }
  if (rc != SQLITE_ROW) {
    absl::Status s = Error(rc, "enabling WAL");
    if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
      return not_hilo(s);
    }
    return s;
  }
  if (absl::Status s =
          Exec(options_.sync == SyncMode::kFull ? "PRAGMA synchronous=FULL"
                                                : "PRAGMA synchronous=NORMAL");
      !s.ok()) {
    return s;
  }

  // Check the identity and version, then create the schema, atomically.
  absl::StatusOr<bool> created = internal::CreateOrMigrateSqliteSchema(
      db_, options_.path, options_.node_tag, options_.retag_from,
      options_.create_if_missing);
  if (!created.ok()) {
    if (created.status().code() == absl::StatusCode::kInternal) {
      return not_hilo(created.status());
    }
    return created.status();
  }
  created_ = *created;

  auto prepare = [&](const char* sql, std::unique_ptr<Statement>* out)
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                      &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "preparing a statement");
    *out = std::make_unique<Statement>(stmt);
    return absl::OkStatus();
  };
  if (absl::Status s = prepare(kSelectRow, &select_); !s.ok()) return s;
  if (absl::Status s =
          prepare("DELETE FROM collections WHERE name=?1", &delete_);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> count = ReadInt("SELECT count(*) FROM collections");
  if (!count.ok()) return count.status();
  collection_count_.store(*count);
  // Every operation of a batch runs between these three; prepared once,
  // they skip SQLite's parser, a measurable share of a NextRange.
  for (auto [sql, out] : {std::pair{"SAVEPOINT op", &savepoint_},
                          {"RELEASE op", &release_},
                          {"ROLLBACK TO op", &rollback_to_}}) {
    if (absl::Status s = prepare(sql, out); !s.ok()) return s;
  }
  return prepare(
      "INSERT INTO collections(name, max, return_floor, updated_at_us, "
      "range_token, previous_token, previous_return_floor) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(name) DO UPDATE SET "
      "max=excluded.max, return_floor=excluded.return_floor, "
      "updated_at_us=excluded.updated_at_us, "
      "range_token=excluded.range_token, "
      "previous_token=excluded.previous_token, "
      "previous_return_floor=excluded.previous_return_floor",
      &upsert_);
}

absl::StatusOr<int64_t> SqliteRangeStore::ReadInt(const char* sql) const {
  return internal::SqliteReadInt(db_, sql, options_.path);
}

absl::Status SqliteRangeStore::InitReadOnly() {
  sqlite3_busy_timeout(
      db_, static_cast<int>(absl::ToInt64Milliseconds(options_.busy_timeout)));
  if (absl::Status s = internal::CheckSqliteSchema(db_, options_.path);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> count = ReadInt("SELECT count(*) FROM collections");
  if (!count.ok()) return count.status();
  collection_count_.store(*count);
  return absl::OkStatus();
}

absl::Status SqliteRangeStore::OpenReader() {
  auto reader = std::make_unique<Reader>();
  const int rc = sqlite3_open_v2(
      options_.path.c_str(), &reader->db,
      SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
      nullptr);
  if (rc != SQLITE_OK) {
    return ErrorOn(reader->db, rc, "opening a reading connection");
  }
  sqlite3_busy_timeout(
      reader->db,
      static_cast<int>(absl::ToInt64Milliseconds(options_.busy_timeout)));
  for (auto [sql, out] :
       {std::pair{kSelectRow, &reader->select}, {kSelectRows, &reader->list}}) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(
        reader->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return ErrorOn(reader->db, rc, "preparing a statement");
    }
    *out = std::make_unique<Statement>(stmt);
  }
  // Reads keep a thread of their own: a flood of ListCollections (each a
  // scan of up to a page of rows) must neither block the gRPC threads that
  // receive it nor take turns with the writes.
  reader->queue = std::make_unique<GroupCommit>(
      GroupCommit::Options{.mode = GroupCommit::Mode::kDedicatedThread,
                           .max_batch = options_.max_batch},
      [](absl::Span<GroupCommit::Operation* const> batch) {
        for (GroupCommit::Operation* op : batch) op->status = op->body(*op);
      });
  reader_ = std::move(reader);
  return absl::OkStatus();
}

template <typename T>
void SqliteRangeStore::Submit(
    bool read_only,
    absl::AnyInvocable<absl::Status(T* result, int64_t* rows_created)> body,
    StoreCallback<T> done) {
  // The result lives with the completion; the body, which runs first,
  // writes it through a pointer.
  auto result = std::make_unique<T>();
  T* out = result.get();
  auto op = std::make_unique<GroupCommit::Operation>();
  op->read_only = read_only;
  op->body = [out, body = std::move(body)](
                 GroupCommit::Operation& self) mutable -> absl::Status {
    self.rows_created = 0;
    return body(out, &self.rows_created);
  };
  op->done = [result = std::move(result),
              done = std::move(done)](absl::Status status) mutable {
    if (!status.ok()) {
      done(std::move(status));
    } else {
      done(std::move(*result));
    }
  };
  if (!read_only && options_.read_only) {
    op->done(absl::FailedPreconditionError(
        absl::StrFormat("database %s was opened read-only", options_.path)));
    return;
  }
  if (guard_ != nullptr && guard_->lost()) {
    // Not even a read: what the deleted file says is no one's state.
    op->done(absl::UnavailableError(internal::kFileLostMessage));
    return;
  }
  (read_only ? reader_->queue : queue_)->Submit(std::move(op));
}

void SqliteRangeStore::DoAllocateAsync(absl::string_view collection,
                                       int64_t size, int64_t floor,
                                       uint64_t token, int64_t max_floor_jump,
                                       StoreCallback<Allocation> done) {
  Submit<Allocation>(
      /*read_only=*/false,
      [this, name = std::string(collection), size, floor, token,
       max_floor_jump](Allocation* allocation, int64_t* rows_created)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            absl::StatusOr<std::optional<CollectionState>> row = ReadRow(name);
            if (!row.ok()) return row.status();
            absl::StatusOr<CollectionState> next = ApplyAllocate(
                name, row->value_or(CollectionState{}), size, floor,
                max_floor_jump, token, clock_->Now(), &allocation->range);
            if (!next.ok()) return next.status();
            *rows_created = row->has_value() ? 0 : 1;
            allocation->created = !row->has_value();
            return WriteRow(name, *next);
          },
      std::move(done));
}

void SqliteRangeStore::DoReturnAsync(absl::string_view collection, int64_t end,
                                     int64_t last, uint64_t token,
                                     StoreCallback<ReturnOutcome> done) {
  Submit<ReturnOutcome>(
      /*read_only=*/false,
      [this, name = std::string(collection), end, last, token](
          ReturnOutcome* outcome, int64_t*)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            return ApplyReturnRow(name, end, last, token, outcome);
          },
      std::move(done));
}

absl::Status SqliteRangeStore::ApplyReturnRow(absl::string_view collection,
                                              int64_t end, int64_t last,
                                              uint64_t token,
                                              ReturnOutcome* outcome) {
  absl::StatusOr<std::optional<CollectionState>> row = ReadRow(collection);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    *outcome = ReturnOutcome{false, 0};
    return absl::OkStatus();
  }
  std::optional<CollectionState> next =
      ApplyReturn(**row, end, last, token, clock_->Now(), outcome);
  if (!next.has_value()) return absl::OkStatus();
  return WriteRow(collection, *next);
}

void SqliteRangeStore::ReturnManyAsync(
    std::vector<ReturnItem> items,
    StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) {
  using Outcomes = std::vector<absl::StatusOr<ReturnOutcome>>;
  if (items.empty()) return done(Outcomes());
  Submit<Outcomes>(
      /*read_only=*/false,
      [this, items = std::move(items)](Outcomes* outcomes, int64_t*)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            outcomes->clear();
            outcomes->reserve(items.size());
            for (const ReturnItem& item : items) {
              if (absl::Status s = CheckReturnArguments(item.end, item.last);
                  !s.ok()) {
                outcomes->push_back(std::move(s));
                continue;
              }
              ReturnOutcome outcome;
              absl::Status s;
              if (item.foreign) {
                absl::StatusOr<std::optional<CollectionState>> row =
                    ReadRow(item.collection);
                s = row.status();
                if (row.ok()) outcome.max = row->has_value() ? (*row)->max : 0;
              } else {
                // A failed statement undoes itself; an item writes with one
                // statement at most, so a failed item changed nothing.
                s = ApplyReturnRow(item.collection, item.end, item.last,
                                   item.token, &outcome);
              }
              // Without its transaction (SQLite ends it on some I/O errors),
              // the batch is lost: report that, and write nothing outside it.
              if (!s.ok() && sqlite3_get_autocommit(db_)) return s;
              if (s.ok()) {
                outcomes->push_back(outcome);
              } else {
                outcomes->push_back(std::move(s));
              }
            }
            return absl::OkStatus();
          },
      std::move(done));
}

void SqliteRangeStore::GetAsync(
    absl::string_view collection,
    StoreCallback<std::optional<CollectionState>> done) {
  Submit<std::optional<CollectionState>>(
      /*read_only=*/true,
      [this, name = std::string(collection)](
          std::optional<CollectionState>* state, int64_t*) -> absl::Status {
        absl::StatusOr<std::optional<CollectionState>> row =
            ReadRow(reader_->db, *reader_->select, name);
        if (!row.ok()) return row.status();
        *state = *std::move(row);
        return absl::OkStatus();
      },
      std::move(done));
}

void SqliteRangeStore::DoListAsync(
    absl::string_view after, int limit,
    StoreCallback<std::vector<NamedCollectionState>> done) {
  Submit<std::vector<NamedCollectionState>>(
      /*read_only=*/true,
      [this, after = std::string(after), limit](
          std::vector<NamedCollectionState>* result, int64_t*) {
        return ReadRows(reader_->db, *reader_->list, after, limit, result);
      },
      std::move(done));
}

void SqliteRangeStore::DoSetFloorAsync(absl::string_view collection,
                                       int64_t floor,
                                       StoreCallback<FloorOutcome> done) {
  Submit<FloorOutcome>(
      /*read_only=*/false,
      [this, name = std::string(collection), floor](FloorOutcome* outcome,
                                                    int64_t* rows_created)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            absl::StatusOr<std::optional<CollectionState>> row = ReadRow(name);
            if (!row.ok()) return row.status();
            const absl::Time now = clock_->Now();
            std::optional<CollectionState> next = ApplySetFloor(
                row->value_or(CollectionState{}), floor, now, outcome);
            if (!next.has_value() && row->has_value()) return absl::OkStatus();
            *rows_created = row->has_value() ? 0 : 1;
            outcome->created = !row->has_value();
            return WriteRow(name,
                            next.value_or(CollectionState{.updated_at = now}));
          },
      std::move(done));
}

void SqliteRangeStore::DeleteAsync(absl::string_view collection,
                                   StoreCallback<CollectionState> done) {
  Submit<CollectionState>(
      /*read_only=*/false,
      [this, name = std::string(collection)](CollectionState* deleted,
                                             int64_t* rows_created)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            absl::StatusOr<std::optional<CollectionState>> row = ReadRow(name);
            if (!row.ok()) return row.status();
            if (!row->has_value()) {
              return absl::NotFoundError(absl::StrFormat(
                  "collection \"%s\" has no row; there is nothing to delete",
                  name));
            }
            if (absl::Status s = CheckDeletable(name, **row); !s.ok()) return s;
            sqlite3_stmt* stmt = delete_->get();
            sqlite3_bind_text(stmt, 1, name.data(),
                              static_cast<int>(name.size()), SQLITE_STATIC);
            const int rc = sqlite3_step(stmt);
            delete_->Reset();
            if (rc != SQLITE_DONE) {
              return Error(rc,
                           absl::StrCat("deleting collection \"", name, "\""));
            }
            *deleted = **row;
            *rows_created = -1;
            return absl::OkStatus();
          },
      std::move(done));
}

absl::Status SqliteRangeStore::PutForTesting(absl::string_view collection,
                                             const CollectionState& state) {
  if (options_.read_only) {
    return absl::FailedPreconditionError(
        absl::StrFormat("database %s was opened read-only", options_.path));
  }
  return queue_->Run(
      [&](GroupCommit::Operation& op)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_) -> absl::Status {
            absl::StatusOr<std::optional<CollectionState>> row =
                ReadRow(collection);
            if (!row.ok()) return row.status();
            op.rows_created = row->has_value() ? 0 : 1;
            return WriteRow(collection, state);
          },
      /*read_only=*/false);
}

absl::Status SqliteRangeStore::CheckFile() {
  if (guard_ == nullptr) return absl::OkStatus();
  absl::Status status = guard_->Check();
  guard_->ReportIfLost();
  return status;
}

int64_t SqliteRangeStore::commits() const {
  return queue_ != nullptr ? queue_->commits() : 0;
}

void SqliteRangeStore::WaitForPendingForTesting(size_t n) {
  if (queue_ != nullptr) queue_->WaitForPendingForTesting(n);
}

}  // namespace hilo
