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
#include "hilo/base/await.h"
#include "service/store/sqlite/sqlite_batch_writer.h"
#include "service/store/sqlite/sqlite_file.h"
#include "service/store/sqlite/sqlite_file_guard.h"
#include "service/store/sqlite/sqlite_judges.h"
#include "service/store/sqlite/sqlite_reservations.h"
#include "service/store/sqlite/sqlite_schema.h"
#include "service/store/sqlite/sqlite_statement.h"
#include "service/store/store_arguments.h"

namespace hilo {
namespace {

using internal::CreateDirectoriesDurably;
using internal::FsyncDirectory;
using internal::kSelectRow;
using internal::kSelectRows;
using internal::SqliteHeldRows;

// InvalidArgument naming the first option Open cannot work with.
absl::Status CheckOptions(const SqliteRangeStoreOptions& options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("database path is empty");
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteRangeStore>> SqliteRangeStore::Open(
    SqliteRangeStoreOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (options.read_only) return OpenReadOnly(std::move(options));
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
  if (absl::Status s = store->StartWriting(is_new, parent); !s.ok()) {
    return s;
  }
  if (store->went_back_.has_value() && store->options_.on_history_went_back) {
    store->options_.on_history_went_back(*store->went_back_);
  }
  return store;
}

absl::StatusOr<std::unique_ptr<SqliteRangeStore>>
SqliteRangeStore::OpenReadOnly(SqliteRangeStoreOptions options) {
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

absl::Status SqliteRangeStore::StartWriting(
    bool is_new, const std::filesystem::path& parent) {
  queue_ = std::make_unique<GroupCommit>(
      GroupCommit::Options{.max_batch = options_.max_batch},
      [this](absl::Span<GroupCommit::Operation* const> batch) {
        writer_->Run(batch);
        // Outside the writer's lock: the callback may take its time, or
        // exit.
        guard_->ReportIfLost();
      });
  if (is_new) {
    // The new file's directory entry, or a restart could find no database
    // and begin again at 1.
    if (absl::Status s =
            FsyncDirectory(parent.empty() ? "." : parent.string(), options_);
        !s.ok()) {
      return s;
    }
  }
  return guard_->Watch(options_.file_check_interval, options_.on_file_lost);
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
  std::unique_ptr<internal::SqliteStatement> select;
  std::unique_ptr<internal::SqliteStatement> list;
  std::unique_ptr<GroupCommit> queue;
};

SqliteRangeStore::~SqliteRangeStore() {
  // Closing the last connection deletes the -wal file: not a lost log.
  if (guard_ != nullptr) guard_->StopWatching();
  // Completes every queued operation before the statements go.
  reader_.reset();
  queue_.reset();
  const bool flush_failed = writer_ != nullptr && writer_->broken();
  writer_.reset();
  base::MutexLock lock(&writer_mu_);
  if (marked_running_ && flush_failed) {
    // The log holds batches the disk may not: the next start, on any boot,
    // must move to the ceilings, and nothing may copy those pages into the
    // database file at close.
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    internal::MarkFlushFailed(db_, options_.path).IgnoreError();
  } else if (marked_running_ && !guard_->lost()) {
    // A clean close: the next start, on any boot, moves nothing. With
    // fsync, so every commit before it is on disk too. An error leaves the
    // mark, which costs one reach of numbers per collection if the
    // machine is restarted before the next start, nothing otherwise.
    if (options_.sync == SyncMode::kFull) {
      Exec("PRAGMA synchronous=FULL").IgnoreError();
    }
    internal::MarkStopped(db_, options_.path).IgnoreError();
  }
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

  std::optional<std::string> boot = options_.machine_boot;
  if (options_.machine_boot.empty()) {
    boot = internal::ReadRunningSession(options_.path);
  }
  int64_t skipped = 0;
  absl::StatusOr<internal::RunningMark> mark =
      internal::MarkRunning(db_, options_.path, boot, clock_->Now(), &skipped);
  if (!mark.ok()) return mark.status();
  marked_running_ = true;
  // From here every COMMIT is written without waiting for the disk; the
  // batch writer flushes the log after those that must wait. Only where a
  // write leaves the bytes around it alone (powersafe overwrite): elsewhere
  // a power cut during an unflushed commit's write may tear the flushed
  // reservation beside it, so every commit keeps waiting for the disk.
  if (internal::HasPowersafeOverwrite(db_)) {
    if (absl::Status s = Exec("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
  }
  if (mark->left_by_another_boot) {
    went_back_ = StoreHistoryEvent{
        .reason = absl::StrFormat(
            "database %s was open when the machine went down, or its file "
            "system was mounted anew (or it moved from another machine): its "
            "last commits may be lost, so every collection moves to its "
            "reservation",
            options_.path),
        .collections = mark->moved,
        .numbers_skipped = skipped};
  }

  absl::StatusOr<int64_t> count = ReadInt("SELECT count(*) FROM collections");
  if (!count.ok()) return count.status();
  collection_count_.store(*count);
  return OpenWriter();
}

absl::Status SqliteRangeStore::OpenWriter() {
  internal::SqliteBatchWriter::Options options{
      .path = options_.path,
      .sync = options_.sync,
      .max_held_rows = options_.max_held_rows,
      .clock = clock_,
      .check_file =
          [guard = guard_.get()] {
            return guard != nullptr ? guard->Check() : absl::OkStatus();
          },
      .on_commit =
          [this](absl::Duration commit, int writes, int64_t created) {
            collection_count_.fetch_add(created, std::memory_order_relaxed);
            if (options_.on_commit) {
              options_.on_commit(
                  commit, writes,
                  collection_count_.load(std::memory_order_relaxed));
            }
          },
      .before_commit_for_testing = options_.before_commit_for_testing,
      .before_write_for_testing = options_.before_write_for_testing};
  absl::StatusOr<std::unique_ptr<internal::SqliteBatchWriter>> writer =
      internal::SqliteBatchWriter::Create(db_, std::move(options));
  if (!writer.ok()) return writer.status();
  writer_ = *std::move(writer);
  return absl::OkStatus();
}

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
    *out = std::make_unique<internal::SqliteStatement>(stmt);
  }
  // Reads keep a thread of their own: a flood of ListCollections (each a
  // scan of up to a page of rows) must neither block the gRPC threads that
  // receive it nor take turns with the writes.
  reader->queue = std::make_unique<GroupCommit>(
      GroupCommit::Options{.max_batch = options_.max_batch},
      [](absl::Span<GroupCommit::Operation* const> batch) {
        for (GroupCommit::Operation* op : batch) op->status = op->body(*op);
      });
  reader_ = std::move(reader);
  return absl::OkStatus();
}

template <typename T>
void SqliteRangeStore::SubmitRead(
    absl::AnyInvocable<absl::Status(T* result)> body, StoreCallback<T> done) {
  // The result lives with the completion; the body, which runs first,
  // writes it through a pointer.
  auto result = std::make_unique<T>();
  T* out = result.get();
  auto op = std::make_unique<GroupCommit::Operation>();
  op->read_only = true;
  op->body = [out, body = std::move(body)](GroupCommit::Operation&) mutable {
    return body(out);
  };
  op->done = [result = std::move(result),
              done = std::move(done)](absl::Status status) mutable {
    if (!status.ok()) {
      done(std::move(status));
    } else {
      done(std::move(*result));
    }
  };
  if (guard_ != nullptr && guard_->lost()) {
    // Not even a read: what the deleted file says is no one's state.
    op->done(absl::UnavailableError(internal::kFileLostMessage));
    return;
  }
  reader_->queue->Submit(std::move(op));
}

namespace {

// One write with everything it carries: its judge, the result the judge
// fills and the caller's callback. The writer's two callables capture only
// the write itself, so they fit in AnyInvocable's own storage.
template <typename T, typename Judge>
struct TypedWrite final : internal::SqliteBatchWriter::Write {
  TypedWrite(Judge judge_with_result, StoreCallback<T> done_with_result)
      : judge_result(std::move(judge_with_result)),
        callback(std::move(done_with_result)) {
    this->judge = [this](SqliteHeldRows& rows, absl::Time now) {
      return judge_result(rows, now, &result);
    };
    this->done = [this](absl::Status status) {
      if (!status.ok()) {
        callback(std::move(status));
      } else {
        callback(std::move(result));
      }
    };
  }
  // Its address is in the callables above.
  TypedWrite(const TypedWrite&) = delete;
  TypedWrite& operator=(const TypedWrite&) = delete;

  Judge judge_result;
  StoreCallback<T> callback;
  T result{};
};

}  // namespace

template <typename T, typename Judge>
void SqliteRangeStore::SubmitWrite(Judge judge, StoreCallback<T> done) {
  if (options_.read_only) {
    done(absl::FailedPreconditionError(
        absl::StrFormat("database %s was opened read-only", options_.path)));
    return;
  }
  if (guard_->lost()) {
    done(absl::UnavailableError(internal::kFileLostMessage));
    return;
  }
  queue_->Submit(std::make_unique<TypedWrite<T, Judge>>(std::move(judge),
                                                        std::move(done)));
}

void SqliteRangeStore::DoAllocateAsync(absl::string_view collection,
                                       int64_t size, int64_t floor,
                                       uint64_t token, int64_t max_floor_jump,
                                       bool may_create,
                                       StoreCallback<Allocation> done) {
  SubmitWrite<Allocation>(
      [name = std::string(collection), size, floor, token, max_floor_jump,
       may_create](SqliteHeldRows& rows, absl::Time now, Allocation* out) {
        return internal::JudgeAllocate(rows, name, size, floor, max_floor_jump,
                                       token, now, out, may_create);
      },
      std::move(done));
}

void SqliteRangeStore::DoReturnAsync(absl::string_view collection, int64_t end,
                                     int64_t last, uint64_t token,
                                     StoreCallback<ReturnOutcome> done) {
  SubmitWrite<ReturnOutcome>(
      [name = std::string(collection), end, last, token](
          SqliteHeldRows& rows, absl::Time now, ReturnOutcome* out) {
        return internal::JudgeReturn(rows, name, end, last, token, now, out);
      },
      std::move(done));
}

void SqliteRangeStore::ReturnManyAsync(
    std::vector<ReturnItem> items,
    StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) {
  using Outcomes = std::vector<absl::StatusOr<ReturnOutcome>>;
  if (items.empty()) return done(Outcomes());
  SubmitWrite<Outcomes>(
      [items = std::move(items)](SqliteHeldRows& rows, absl::Time now,
                                 Outcomes* out) {
        return internal::JudgeReturnMany(items, rows, now, out);
      },
      std::move(done));
}

void SqliteRangeStore::GetAsync(
    absl::string_view collection,
    StoreCallback<std::optional<CollectionState>> done) {
  SubmitRead<std::optional<CollectionState>>(
      [this, name = std::string(collection)](
          std::optional<CollectionState>* state) -> absl::Status {
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
  SubmitRead<std::vector<NamedCollectionState>>(
      [this, after = std::string(after),
       limit](std::vector<NamedCollectionState>* result) {
        return ReadRows(reader_->db, *reader_->list, after, limit, result);
      },
      std::move(done));
}

void SqliteRangeStore::DoSetFloorAsync(absl::string_view collection,
                                       int64_t floor,
                                       StoreCallback<FloorOutcome> done) {
  SubmitWrite<FloorOutcome>(
      [name = std::string(collection), floor](
          SqliteHeldRows& rows, absl::Time now, FloorOutcome* out) {
        return internal::JudgeSetFloor(rows, name, floor, now, out);
      },
      std::move(done));
}

void SqliteRangeStore::DeleteAsync(absl::string_view collection,
                                   StoreCallback<CollectionState> done) {
  SubmitWrite<CollectionState>(
      [name = std::string(collection)](SqliteHeldRows& rows, absl::Time,
                                       CollectionState* deleted) {
        return internal::JudgeDelete(rows, name, deleted);
      },
      std::move(done));
}

void SqliteRangeStore::RetireAsync(absl::string_view collection,
                                   StoreCallback<CollectionState> done) {
  SubmitWrite<CollectionState>(
      [name = std::string(collection)](SqliteHeldRows& rows, absl::Time,
                                       CollectionState* retired) {
        return internal::JudgeRetire(rows, name, retired);
      },
      std::move(done));
}

absl::Status SqliteRangeStore::PutForTesting(absl::string_view collection,
                                             const CollectionState& state) {
  absl::StatusOr<bool> put = base::Await<absl::StatusOr<bool>>(
      [&](absl::AnyInvocable<void(absl::StatusOr<bool>)> done) {
        SubmitWrite<bool>(
            [name = std::string(collection), state](SqliteHeldRows& rows,
                                                    absl::Time, bool* out) {
              *out = true;
              return internal::JudgePut(rows, name, state);
            },
            std::move(done));
      });
  return put.status();
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

int64_t SqliteRangeStore::rows_written() const {
  return writer_ != nullptr ? writer_->rows_written() : 0;
}

void SqliteRangeStore::WaitForPendingForTesting(size_t n) {
  if (queue_ != nullptr) queue_->WaitForPendingForTesting(n);
}

}  // namespace hilo
