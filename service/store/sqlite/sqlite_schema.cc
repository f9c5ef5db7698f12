#include "service/store/sqlite/sqlite_schema.h"

#include <sqlite3.h>

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/sqlite/sqlite_file.h"

namespace hilo {
namespace internal {
namespace {

// Identifies a hilo database ("HiLo" in ASCII) and its schema version.
constexpr int32_t kApplicationId = 0x48694c6f;
// Version 7 keeps each collection's ceiling, the highest number the store
// may hand out from it without waiting for the disk (sqlite_reservations.h),
// which a server that does not know it would neither raise nor move to after
// a machine's crash; version 6 keeps the Max of retired collections (table
// retired_collections), which a server that does not know it would ignore
// and so hand those numbers out again; version 5 records the node tag the file
// issues under (table node); version 4 keeps digests of the range tokens
// instead of the tokens; version 3 adds the range tokens; version 2 stores
// return_floor; version 1 stored last_low, which is return_floor + 1 and so
// could not say "nothing may come back" at INT64_MAX.
constexpr int kSchemaVersion = 7;

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
  previous_return_floor INTEGER NOT NULL DEFAULT 0,
  ceiling               INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
)sql";

// What the file is about as a whole: key 'tag' is the node tag its numbers
// were issued under; key 'running', while a server has the file open, the
// boot of the machine it runs on (sqlite_reservations.h).
constexpr char kNodeTable[] = R"sql(
CREATE TABLE IF NOT EXISTS node (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql";

// Names RangeStore::RetireAsync retired, each with the highest number it
// had handed out (RetiredMax): a new row of the name starts above it.
constexpr char kRetiredTable[] = R"sql(
CREATE TABLE IF NOT EXISTS retired_collections (
  name TEXT    NOT NULL PRIMARY KEY,
  max  INTEGER NOT NULL
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

// Version 3 to 4. Tokens were stored in clear, so whoever read the file (or
// a copy or backup of it) before the upgrade may hold a live range's token:
// every range out with a token is retired instead of carried over as a
// digest. No return applies to it any more (no token, the return floor at
// Max), so its unused numbers stay unused: lost, never repeated. Rows
// without a token (ranges issued before tokens) keep their return floors.
constexpr char kMigrateFrom3[] = R"sql(
UPDATE collections SET return_floor = max, range_token = 0,
                       previous_token = 0, previous_return_floor = 0
  WHERE range_token != 0 OR previous_token != 0;
PRAGMA user_version = 4;
)sql";

// Version 4 to 5: the node table. Its tag is stored by the first start
// that knows one (CheckOrStoreNodeTag).
constexpr char kMigrateFrom4[] = R"sql(
CREATE TABLE IF NOT EXISTS node (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
PRAGMA user_version = 5;
)sql";

// Version 5 to 6: no name was retired before.
constexpr char kMigrateFrom5[] = R"sql(
CREATE TABLE IF NOT EXISTS retired_collections (
  name TEXT    NOT NULL PRIMARY KEY,
  max  INTEGER NOT NULL
) WITHOUT ROWID;
PRAGMA user_version = 6;
)sql";

// Version 6 to 7: no row has a reservation yet (ceiling 0), so each one's
// next range reserves anew, waiting for the disk as every range did before.
constexpr char kMigrateFrom6[] = R"sql(
ALTER TABLE collections ADD COLUMN ceiling INTEGER NOT NULL DEFAULT 0;
PRAGMA user_version = 7;
)sql";

// Stores `tag` in a file that has none, or checks that the file's tag is
// `tag`, re-tagging it if its tag is `retag_from`. Inside the start-up
// transaction.
absl::Status CheckOrStoreNodeTag(sqlite3* db, absl::string_view path,
                                 absl::string_view tag,
                                 absl::string_view retag_from) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT value FROM node WHERE key = 'tag'",
                              -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  std::optional<std::string> stored;
  if (rc == SQLITE_ROW) {
    stored.emplace(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                   sqlite3_column_bytes(stmt, 0));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return SqliteError(db, rc, "reading the node tag", path);
  }
  if (stored.has_value() && *stored != tag) {
    if (retag_from != *stored) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s issued its numbers under node tag %s, not %s: under %s "
          "they would repeat IDs; run it as --node_tag=%s, or re-tag it on "
          "purpose with --retag_database=%s (see service/store/sqlite/"
          "README.md)%s",
          path, *stored, tag, tag, *stored, *stored,
          retag_from.empty()
              ? ""
              : absl::StrCat(" (--retag_database names ", retag_from, ")")));
    }
  } else if (stored.has_value()) {
    if (!retag_from.empty()) {
      // Left in place, the flag would re-tag, without a word, a file of
      // retag_from's put here by mistake later.
      return absl::FailedPreconditionError(absl::StrFormat(
          "database %s is node tag %s's already: remove --retag_database=%s, "
          "which re-tags once (left in place it would re-tag a database of %s "
          "restored here by mistake, and repeat its IDs under %s)",
          path, tag, retag_from, retag_from, tag));
    }
    return absl::OkStatus();
  }
  rc = sqlite3_prepare_v2(db,
                          "INSERT INTO node(key, value) VALUES('tag', ?1) "
                          "ON CONFLICT(key) DO UPDATE SET value = "
                          "excluded.value",
                          -1, &stmt, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, tag.data(), static_cast<int>(tag.size()),
                      SQLITE_TRANSIENT);
    rc = sqlite3_step(stmt);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) {
    return SqliteError(db, rc, "storing the node tag", path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> CreateOrMigrateSqliteSchema(sqlite3* db,
                                                 absl::string_view path,
                                                 absl::string_view node_tag,
                                                 absl::string_view retag_from,
                                                 bool may_create) {
  if (absl::Status s = SqliteExec(db, "BEGIN IMMEDIATE", path); !s.ok())
    return s;
  bool created = false;
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
      if (!may_create) {
        return absl::NotFoundError(absl::StrFormat(
            "database %s is an empty file, not a hilo database", path));
      }
      // A new, empty file: make it ours.
      created = true;
      if (absl::Status s = SqliteExec(db, kSchema, path); !s.ok()) return s;
      if (absl::Status s = SqliteExec(db, kNodeTable, path); !s.ok()) {
        return s;
      }
      if (absl::Status s = SqliteExec(db, kRetiredTable, path); !s.ok()) {
        return s;
      }
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
    const char* const migrations[] = {
        nullptr,       kMigrateFrom1, kMigrateFrom2, kMigrateFrom3,
        kMigrateFrom4, kMigrateFrom5, kMigrateFrom6};
    static_assert(std::size(migrations) == kSchemaVersion);
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
  if (s.ok() && !node_tag.empty()) {
    s = CheckOrStoreNodeTag(db, path, node_tag, retag_from);
  }
  if (s.ok()) s = SqliteExec(db, "COMMIT", path);
  if (!s.ok()) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  return created;
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
