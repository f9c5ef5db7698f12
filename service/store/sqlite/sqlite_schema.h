// hilo's table in SQLite: what it is, the version this server understands,
// and the migrations from older versions. A hilo file carries
// PRAGMA application_id "HiLo" and its version in PRAGMA user_version.
//
// Private to service/; SqliteRangeStore::Open runs one of these on its
// writing connection before it prepares any statement.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_SCHEMA_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_SCHEMA_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;

namespace hilo {
namespace internal {

// Makes an empty file a hilo database, migrates an older hilo schema step
// by step, or checks that the file holds this version; in one BEGIN
// IMMEDIATE transaction, rolled back on any failure, so the file stays at
// the version it had. `path` names the file in errors.
//
// With a `node_tag`, the same transaction stores it in a file that has
// none (a new file, or the first start after the upgrade to version 5) and
// otherwise checks that the file's tag is `node_tag`; a file of another tag
// is re-tagged to `node_tag` only if its tag is `retag_from`.
//
// An empty file (no tables, no application id) gets the schema only if
// `may_create`. Returns whether it did: the file is a new database.
//
// Errors: NOT_FOUND if the file is empty and !may_create (nothing
// changed); FAILED_PRECONDITION if the file belongs to another application,
// holds a newer schema, or was tagged otherwise (one line naming both
// tags); SQLite's errors (SqliteError) otherwise; an INTERNAL one means the
// file is not usable SQLite.
absl::StatusOr<bool> CreateOrMigrateSqliteSchema(sqlite3* db,
                                                 absl::string_view path,
                                                 absl::string_view node_tag,
                                                 absl::string_view retag_from,
                                                 bool may_create);

// Checks, changing nothing, that the file is a hilo database of this
// schema version (for a read-only open, which cannot migrate).
// Errors: FAILED_PRECONDITION if it is not SQLite, corrupt, another
// application's, or of another version; SQLite's errors otherwise.
absl::Status CheckSqliteSchema(sqlite3* db, absl::string_view path);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_SCHEMA_H_
