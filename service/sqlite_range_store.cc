#include "service/sqlite_range_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo {
namespace {

// Identifies a hilo database ("HiLo" in ASCII) and its schema version.
constexpr int32_t kApplicationId = 0x48694c6f;
// Version 2 stores return_floor; version 1 stored last_low, which is
// return_floor + 1 and so could not say "nothing may come back" at INT64_MAX.
constexpr int kSchemaVersion = 2;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS collections (
  name          TEXT    NOT NULL PRIMARY KEY,
  max           INTEGER NOT NULL,
  return_floor  INTEGER NOT NULL,
  updated_at_us INTEGER NOT NULL
) WITHOUT ROWID;
)sql";

// Version 1 to 2, in the start-up transaction. last_low - 1 is the floor,
// except where version 1 could not hold it: a return at INT64_MAX wrapped
// last_low to INT64_MIN, and a floor or one-number range at INT64_MAX left
// last_low == max == INT64_MAX. Those rows get return_floor = max, which
// refuses every return rather than trusting one.
constexpr char kMigrateFrom1[] = R"sql(
UPDATE collections SET last_low =
  CASE WHEN last_low = -9223372036854775808
         OR (last_low = 9223372036854775807 AND max = 9223372036854775807)
       THEN max
       ELSE last_low - 1 END;
ALTER TABLE collections RENAME COLUMN last_low TO return_floor;
PRAGMA user_version = 2;
)sql";

absl::StatusCode CodeForSqlite(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

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

// One operation waiting for, or running in, a batch.
struct SqliteRangeStore::Op {
  Op(absl::FunctionRef<absl::Status(bool*)> f, bool reads_only)
      : fn(f), read_only(reads_only) {}
  absl::FunctionRef<absl::Status(bool*)> fn;
  const bool read_only;  // fn writes nothing
  absl::Status status;
  bool created_row = false;  // set by fn when it inserted a row
  // Under mu_: set when the op's batch is committed, or when the op is to
  // lead the next batch; `wake` is signalled for either. One condition
  // variable per op, so finishing a batch wakes exactly its callers and the
  // next leader, not every thread waiting behind later commits.
  bool done = false;
  bool lead = false;
  std::condition_variable wake;
};

// A prepared statement, reset and unbound after each use.
class SqliteRangeStore::Statement {
 public:
  Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const { return stmt_; }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* const stmt_;
};

absl::StatusOr<std::unique_ptr<SqliteRangeStore>> SqliteRangeStore::Open(
    SqliteRangeStoreOptions options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("database path is empty");
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max batch is %d; it must be at least 1", options.max_batch));
  }
  const std::filesystem::path parent =
      std::filesystem::path(options.path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrFormat("cannot create directory %s for database %s: %s",
                          parent.string(), options.path, ec.message()));
    }
  }
  const std::string path = options.path;
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
  if (absl::Status s = store->Init(); !s.ok()) return explain(std::move(s));
  return store;
}

SqliteRangeStore::SqliteRangeStore(SqliteRangeStoreOptions options, sqlite3* db)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      db_(db) {}

SqliteRangeStore::~SqliteRangeStore() {
  select_.reset();
  upsert_.reset();
  list_.reset();
  sqlite3_close(db_);
}

absl::Status SqliteRangeStore::Error(int rc, absl::string_view what) const {
  const int errcode = sqlite3_extended_errcode(db_);
  const char* message =
      errcode == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return absl::Status(CodeForSqlite(rc),
                      absl::StrFormat("%s on database %s: %s (SQLite code %d)",
                                      what, options_.path, message, rc));
}

absl::Status SqliteRangeStore::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, absl::StrCat("\"", sql, "\""));
  return absl::OkStatus();
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
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto read_int = [&](const char* sql) -> absl::StatusOr<int64_t> {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    int64_t value = 0;
    if (rc == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW) return Error(rc, sql);
    return value;
  };
  auto init = [&]() -> absl::Status {
    absl::StatusOr<int64_t> app_id = read_int("PRAGMA application_id");
    if (!app_id.ok()) return app_id.status();
    absl::StatusOr<int64_t> version = read_int("PRAGMA user_version");
    if (!version.ok()) return version.status();
    absl::StatusOr<int64_t> tables =
        read_int("SELECT count(*) FROM sqlite_schema");
    if (!tables.ok()) return tables.status();
    if (*app_id == 0 && *version == 0 && *tables == 0) {
      // A new, empty file: make it ours.
      if (absl::Status s = Exec(kSchema); !s.ok()) return s;
      if (absl::Status s = Exec(
              absl::StrCat("PRAGMA application_id=", kApplicationId).c_str());
          !s.ok()) {
        return s;
      }
      return Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str());
    }
    if (*app_id != kApplicationId) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s is an SQLite file of another application "
          "(application_id %d)",
          options_.path, *app_id));
    }
    if (*version == 1) {
      // Rolled back with the start-up transaction if it fails: the file
      // stays at version 1.
      const int rc =
          sqlite3_exec(db_, kMigrateFrom1, nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        return Error(rc, absl::StrCat("migrating schema version 1 to ",
                                      kSchemaVersion, " (nothing changed)"));
      }
      *version = kSchemaVersion;
    }
    if (*version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s has schema version %d; this server understands %d",
          options_.path, *version, kSchemaVersion));
    }
    return absl::OkStatus();
  };
  absl::Status s = init();
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    if (s.code() == absl::StatusCode::kInternal) return not_hilo(s);
    return s;
  }

  auto prepare = [&](const char* sql,
                     std::unique_ptr<Statement>* out) -> absl::Status {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                      &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "preparing a statement");
    *out = std::make_unique<Statement>(stmt);
    return absl::OkStatus();
  };
  if (absl::Status s = prepare("SELECT max, return_floor, updated_at_us FROM "
                               "collections WHERE name=?1",
                               &select_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = prepare(
          "SELECT name, max, return_floor, updated_at_us FROM collections "
          "WHERE name > ?1 ORDER BY name LIMIT ?2",
          &list_);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> count = read_int("SELECT count(*) FROM collections");
  if (!count.ok()) return count.status();
  collection_count_.store(*count);
  return prepare(
      "INSERT INTO collections(name, max, return_floor, updated_at_us) "
      "VALUES(?1, ?2, ?3, ?4) ON CONFLICT(name) DO UPDATE SET "
      "max=excluded.max, return_floor=excluded.return_floor, "
      "updated_at_us=excluded.updated_at_us",
      &upsert_);
}

absl::Status SqliteRangeStore::Run(
    absl::FunctionRef<absl::Status(bool* created_row)> fn, bool read_only) {
  Op op(fn, read_only);
  std::unique_lock<std::mutex> lock(mu_);
  pending_.push_back(&op);
  pending_grew_.notify_all();  // for WaitForPendingForTesting only
  // Invariant: with no leader, nothing is pending; so `op` is first in line.
  if (!leader_active_) {
    leader_active_ = true;
    op.lead = true;
  }
  op.wake.wait(lock, [&] { return op.done || op.lead; });
  if (op.done) return op.status;

  // Lead the next batch: the longest-waiting ops, `op` first among them.
  std::vector<Op*> batch;
  const size_t n =
      std::min(pending_.size(), static_cast<size_t>(options_.max_batch));
  batch.assign(pending_.begin(), pending_.begin() + n);
  pending_.erase(pending_.begin(), pending_.begin() + n);
  lock.unlock();
  RunBatch(batch);
  lock.lock();
  ++commits_;
  // Hand over to the first op that arrived during the commit, if any. It is
  // woken first, so the next commit need not wait behind this batch's
  // wake-ups.
  if (pending_.empty()) {
    leader_active_ = false;
  } else {
    pending_.front()->lead = true;
    pending_.front()->wake.notify_one();
  }
  for (Op* done : batch) {
    done->done = true;
    // Under the lock: the op (and its condition variable) lives until its
    // caller, woken here, gets the lock and returns.
    if (done != &op) done->wake.notify_one();
  }
  return op.status;
}

void SqliteRangeStore::RunBatch(const std::vector<Op*>& batch) {
  if (!RunBatchInTransaction(batch)) {
    // Nothing of the batch was applied. A read may have seen a write that
    // was then rolled back, or failed only because the commit did (a full
    // disk, say); reads need no disk space, so run them again, each on its
    // own, against what is really stored.
    for (Op* op : batch) {
      if (!op->read_only) continue;
      bool unused = false;
      op->status = op->fn(&unused);
    }
  }
}

bool SqliteRangeStore::RunBatchInTransaction(const std::vector<Op*>& batch) {
  absl::Status begin = Exec("BEGIN IMMEDIATE");
  if (!begin.ok()) {
    for (Op* op : batch) op->status = begin;
    return false;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Op* op = batch[i];
    absl::Status s = Exec("SAVEPOINT op");
    if (s.ok()) {
      s = op->fn(&op->created_row);
      if (!s.ok()) {
        // Undo this operation alone. If SQLite already rolled back the
        // whole transaction (some I/O errors do), the batch is lost below.
        if (!sqlite3_get_autocommit(db_)) {
          Exec("ROLLBACK TO op").IgnoreError();
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
    if (absl::Status r = Exec("RELEASE op"); !r.ok() && s.ok()) s = r;
    op->status = s;
  }
  absl::Status commit;
  if (options_.before_commit_for_testing) {
    commit = options_.before_commit_for_testing();
  }
  const absl::Time commit_start = absl::Now();
  if (commit.ok()) commit = Exec("COMMIT");
  const absl::Duration commit_time = absl::Now() - commit_start;
  if (!commit.ok()) {
    if (!sqlite3_get_autocommit(db_)) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    for (Op* op : batch) {
      if (op->status.ok()) op->status = commit;
    }
    return false;
  }
  int64_t created = 0;
  for (Op* op : batch) {
    if (op->status.ok() && op->created_row) ++created;
  }
  collection_count_.fetch_add(created, std::memory_order_relaxed);
  if (options_.on_commit) {
    options_.on_commit(commit_time, static_cast<int>(batch.size()));
  }
  return true;
}

absl::StatusOr<std::optional<CollectionState>> SqliteRangeStore::ReadRow(
    absl::string_view collection) {
  sqlite3_stmt* stmt = select_->get();
  sqlite3_bind_text(stmt, 1, collection.data(),
                    static_cast<int>(collection.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  std::optional<CollectionState> state;
  if (rc == SQLITE_ROW) {
    state.emplace();
    state->max = sqlite3_column_int64(stmt, 0);
    state->return_floor = sqlite3_column_int64(stmt, 1);
    state->updated_at = absl::FromUnixMicros(sqlite3_column_int64(stmt, 2));
  }
  select_->Reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("reading collection \"", collection, "\""));
  }
  return state;
}

absl::Status SqliteRangeStore::WriteRow(absl::string_view collection,
                                        const CollectionState& state) {
  sqlite3_stmt* stmt = upsert_->get();
  sqlite3_bind_text(stmt, 1, collection.data(),
                    static_cast<int>(collection.size()), SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, state.max);
  sqlite3_bind_int64(stmt, 3, state.return_floor);
  sqlite3_bind_int64(stmt, 4, absl::ToUnixMicros(state.updated_at));
  const int rc = sqlite3_step(stmt);
  upsert_->Reset();
  if (rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("writing collection \"", collection, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<Range> SqliteRangeStore::Allocate(absl::string_view collection,
                                                 int64_t size, int64_t floor) {
  if (size < 1 || floor < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range size %d must be at least 1 and floor %d not negative", size,
        floor));
  }
  Range range;
  absl::Status s = Run([&](bool* created_row) -> absl::Status {
    absl::StatusOr<std::optional<CollectionState>> row = ReadRow(collection);
    if (!row.ok()) return row.status();
    const int64_t max = row->has_value() ? (*row)->max : 0;
    const int64_t base = std::max(max, floor);
    if (base > std::numeric_limits<int64_t>::max() - size) {
      return absl::OutOfRangeError(absl::StrFormat(
          "collection \"%s\": a range of %d above %d would pass INT64_MAX",
          collection, size, base));
    }
    range = Range{base + 1, base + size};
    *created_row = !row->has_value();
    return WriteRow(collection,
                    CollectionState{range.high, base, clock_->Now()});
  });
  if (!s.ok()) return s;
  return range;
}

absl::StatusOr<ReturnOutcome> SqliteRangeStore::Return(
    absl::string_view collection, int64_t end, int64_t last) {
  if (last < 0 || last > end) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "return of (last %d, end %d] needs 0 <= last <= end", last, end));
  }
  ReturnOutcome outcome;
  absl::Status s = Run([&](bool* created_row) -> absl::Status {
    absl::StatusOr<std::optional<CollectionState>> row = ReadRow(collection);
    if (!row.ok()) return row.status();
    if (!row->has_value()) {
      outcome = ReturnOutcome{false, 0};
      return absl::OkStatus();
    }
    const CollectionState& state = **row;
    // last <= end, so last <= Max too.
    if (state.max != end || last < state.return_floor) {
      outcome = ReturnOutcome{false, state.max};
      return absl::OkStatus();
    }
    outcome = ReturnOutcome{true, last};
    return WriteRow(collection, CollectionState{last, last, clock_->Now()});
  });
  if (!s.ok()) return s;
  return outcome;
}

absl::StatusOr<std::optional<CollectionState>> SqliteRangeStore::Get(
    absl::string_view collection) {
  absl::StatusOr<std::optional<CollectionState>> result;
  absl::Status s = Run(
      [&](bool*) -> absl::Status {
        result = ReadRow(collection);
        return result.status();
      },
      /*read_only=*/true);
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<std::vector<NamedCollectionState>> SqliteRangeStore::List(
    absl::string_view after, int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("list limit is %d; it must be at least 1", limit));
  }
  std::vector<NamedCollectionState> result;
  auto list = [&](bool*) -> absl::Status {
    result.clear();
    sqlite3_stmt* stmt = list_->get();
    sqlite3_bind_text(stmt, 1, after.data(), static_cast<int>(after.size()),
                      SQLITE_STATIC);
    sqlite3_bind_int(stmt, 2, limit);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      NamedCollectionState row;
      row.name.assign(
          reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
          sqlite3_column_bytes(stmt, 0));
      row.state.max = sqlite3_column_int64(stmt, 1);
      row.state.return_floor = sqlite3_column_int64(stmt, 2);
      row.state.updated_at =
          absl::FromUnixMicros(sqlite3_column_int64(stmt, 3));
      result.push_back(std::move(row));
    }
    list_->Reset();
    if (rc != SQLITE_DONE) return Error(rc, "listing collections");
    return absl::OkStatus();
  };
  absl::Status s = Run(list, /*read_only=*/true);
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<FloorOutcome> SqliteRangeStore::SetFloor(
    absl::string_view collection, int64_t floor) {
  if (floor < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("floor is %d; it must not be negative", floor));
  }
  FloorOutcome outcome;
  absl::Status s = Run([&](bool* created_row) -> absl::Status {
    absl::StatusOr<std::optional<CollectionState>> row = ReadRow(collection);
    if (!row.ok()) return row.status();
    const int64_t max = row->has_value() ? (*row)->max : 0;
    if (max >= floor && row->has_value()) {
      outcome = FloorOutcome{false, max};
      return absl::OkStatus();
    }
    outcome = FloorOutcome{max < floor, std::max(max, floor)};
    *created_row = !row->has_value();
    return WriteRow(collection,
                    CollectionState{outcome.max, floor, clock_->Now()});
  });
  if (!s.ok()) return s;
  return outcome;
}

absl::Status SqliteRangeStore::PutForTesting(absl::string_view collection,
                                             const CollectionState& state) {
  return Run([&](bool* created_row) -> absl::Status {
    absl::StatusOr<std::optional<CollectionState>> row = ReadRow(collection);
    if (!row.ok()) return row.status();
    *created_row = !row->has_value();
    return WriteRow(collection, state);
  });
}

int64_t SqliteRangeStore::commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commits_;
}

void SqliteRangeStore::WaitForPendingForTesting(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  pending_grew_.wait(lock, [&] { return pending_.size() >= n; });
}

}  // namespace hilo
