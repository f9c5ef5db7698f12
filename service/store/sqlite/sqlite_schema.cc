#include "service/store/sqlite/sqlite_schema.h"

#include <sqlite3.h>

#include <cstdint>
#include <iterator>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/range_token.h"
#include "service/store/sqlite/sqlite_file.h"

namespace hilo {
namespace internal {
namespace {

// Identifies a hilo database ("HiLo" in ASCII) and its schema version.
constexpr int32_t kApplicationId = 0x48694c6f;
// Version 4 keeps digests of the range tokens instead of the tokens;
// version 3 adds the range tokens; version 2 stores return_floor; version 1
// stored last_low, which is return_floor + 1 and so could not say "nothing
// may come back" at INT64_MAX.
constexpr int kSchemaVersion = 4;

// Token digests (RangeTokenDigest) are unsigned 64-bit values stored in
// SQLite's signed INTEGER, bit for bit.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS collections (
  name                  TEXT    NOT NULL PRIMARY KEY,
  max                   INTEGER NOT NULL,
  return_floor          INTEGER NOT NULL,
  updated_at_us         INTEGER NOT NULL,
  range_token           INTEGER NOT NULL DEFAULT 0,
  previous_token        INTEGER NOT NULL DEFAULT 0,
  previous_return_floor INTEGER NOT NULL DEFAULT 0
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

// Version 2 to 3. Ranges issued before have no token: none of them can be
// returned with one, and without one only where the server allows it.
constexpr char kMigrateFrom2[] = R"sql(
ALTER TABLE collections ADD COLUMN range_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE collections ADD COLUMN previous_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE collections ADD COLUMN previous_return_floor INTEGER NOT NULL
  DEFAULT 0;
PRAGMA user_version = 3;
)sql";

// Version 3 to 4. Tokens were stored in clear, so whoever read the file
// could return a live range; each becomes its digest (0 stays 0), which
// the holder's token still matches.
constexpr char kMigrateFrom3[] = R"sql(
UPDATE collections SET range_token = hilo_token_digest(range_token),
                       previous_token = hilo_token_digest(previous_token);
PRAGMA user_version = 4;
)sql";

// hilo_token_digest(token): RangeTokenDigest, for the migration to 4.
void TokenDigestFunction(sqlite3_context* context, int, sqlite3_value** argv) {
  const auto token = static_cast<uint64_t>(sqlite3_value_int64(argv[0]));
  sqlite3_result_int64(context, static_cast<int64_t>(RangeTokenDigest(token)));
}

}  // namespace

absl::Status CreateOrMigrateSqliteSchema(sqlite3* db, absl::string_view path) {
  if (absl::Status s = SqliteExec(db, "BEGIN IMMEDIATE", path); !s.ok())
    return s;
  auto init = [&]() -> absl::Status {
    absl::StatusOr<int64_t> app_id =
        SqliteReadInt(db, "PRAGMA application_id", path);
    if (!app_id.ok()) return app_id.status();
    absl::StatusOr<int64_t> version =
        SqliteReadInt(db, "PRAGMA user_version", path);
    if (!version.ok()) return version.status();
    absl::StatusOr<int64_t> tables =
        SqliteReadInt(db, "SELECT count(*) FROM sqlite_schema", path);
    if (!tables.ok()) return tables.status();
    if (*app_id == 0 && *version == 0 && *tables == 0) {
      // A new, empty file: make it ours.
      if (absl::Status s = SqliteExec(db, kSchema, path); !s.ok()) return s;
      if (absl::Status s = SqliteExec(
              db,
              absl::StrCat("PRAGMA application_id=", kApplicationId).c_str(),
              path);
          !s.ok()) {
        return s;
      }
      return SqliteExec(
          db, absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str(),
          path);
    }
    if (*app_id != kApplicationId) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s is an SQLite file of another application "
          "(application_id %d)",
          path, *app_id));
    }
    // Each step is rolled back with the start-up transaction if a later one
    // fails: the file stays at the version it had.
    const char* const migrations[] = {nullptr, kMigrateFrom1, kMigrateFrom2,
                                      kMigrateFrom3};
    static_assert(std::size(migrations) == kSchemaVersion);
    const int rc = sqlite3_create_function_v2(
        db, "hilo_token_digest", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
        TokenDigestFunction, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      return SqliteError(db, rc, "registering hilo_token_digest", path);
    }
    for (int from = 1; from < kSchemaVersion; ++from) {
      if (*version != from) continue;
      const int rc =
          sqlite3_exec(db, migrations[from], nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        return SqliteError(db, rc,
                           absl::StrFormat("migrating schema version %d to %d "
                                           "(nothing changed)",
                                           from, kSchemaVersion),
                           path);
      }
      *version = from + 1;
    }
    if (*version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s has schema version %d; this server understands %d", path,
          *version, kSchemaVersion));
    }
    return absl::OkStatus();
  };
  absl::Status s = init();
  if (s.ok()) s = SqliteExec(db, "COMMIT", path);
  if (!s.ok()) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  return absl::OkStatus();
}

absl::Status CheckSqliteSchema(sqlite3* db, absl::string_view path) {
  absl::StatusOr<int64_t> app_id =
      SqliteReadInt(db, "PRAGMA application_id", path);
  if (!app_id.ok()) {
    const int rc = sqlite3_extended_errcode(db) & 0xff;
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s cannot be used: %s", path, app_id.status().message()));
    }
    return app_id.status();
  }
  if (*app_id != kApplicationId) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s is not a hilo database (application_id %d)", path,
        *app_id));
  }
  absl::StatusOr<int64_t> version =
      SqliteReadInt(db, "PRAGMA user_version", path);
  if (!version.ok()) return version.status();
  if (*version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s has schema version %d; a read-only open needs %d (a "
        "server migrates it on its next start)",
        path, *version, kSchemaVersion));
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace hilo
