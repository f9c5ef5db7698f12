#include "bench/flush_ceiling.h"

#include <sqlite3.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hilo::bench {
namespace {

absl::Status SqliteExec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status s = absl::InternalError(
        absl::StrCat("\"", sql, "\": ", error != nullptr ? error : "?"));
    sqlite3_free(error);
    return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadResult> FlushCeiling(const std::string& path,
                                        absl::Duration warmup,
                                        absl::Duration window) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("cannot open ", path, ": ", sqlite3_errmsg(db)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closer(db, sqlite3_close);
  std::string mode;
  sqlite3_exec(
      db, "PRAGMA journal_mode=WAL",
      +[](void* out, int, char** values, char**) {
        *static_cast<std::string*>(out) = values[0] != nullptr ? values[0] : "";
        return 0;
      },
      &mode, nullptr);
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("journal mode of ", path, " is \"", mode, "\", not wal"));
  }
  for (const char* sql :
       {"PRAGMA synchronous=FULL",
        "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v INTEGER)"}) {
    if (absl::Status s = SqliteExec(db, sql); !s.ok()) return s;
  }
  sqlite3_stmt* raw[3] = {};
  const char* sql[3] = {"BEGIN IMMEDIATE",
                        "INSERT INTO t (k, v) VALUES (?1, ?2) ON CONFLICT (k) "
                        "DO UPDATE SET v = excluded.v",
                        "COMMIT"};
  std::vector<std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>> stmts;
  for (int i = 0; i < 3; ++i) {
    if (sqlite3_prepare_v2(db, sql[i], -1, &raw[i], nullptr) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("prepare \"", sql[i], "\": ", sqlite3_errmsg(db)));
    }
    stmts.emplace_back(raw[i], sqlite3_finalize);
  }

  LoadResult result;
  const Clock::time_point begin =
      Clock::now() + absl::ToChronoNanoseconds(warmup);
  const Clock::time_point end = begin + absl::ToChronoNanoseconds(window);
  for (int64_t i = 0;; ++i) {
    const Clock::time_point start = Clock::now();
    if (start >= end) break;
    sqlite3_bind_int64(raw[1], 1, i % 100);
    sqlite3_bind_int64(raw[1], 2, i);
    for (sqlite3_stmt* stmt : raw) {
      if (sqlite3_step(stmt) != SQLITE_DONE) {
        return absl::InternalError(
            absl::StrCat("single-row commit: ", sqlite3_errmsg(db)));
      }
      sqlite3_reset(stmt);
    }
    const Clock::time_point stop = Clock::now();
    if (start >= begin) {
      ++result.calls;
      result.latency.Record(NanosSince(start, stop));
    }
  }
  result.seconds = NanosSince(begin, end) / 1e9;
  return result;
}

}  // namespace hilo::bench
