// One SQLite database file as SqliteRangeStore uses it: its directory made
// durable, errors that name the file, and one-value queries. Nothing here
// knows hilo's tables (sqlite_schema.h does).
//
// Private to service/. The functions keep no state; each runs on the thread
// that owns the connection given.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/store/sqlite/sqlite_options.h"

struct sqlite3;

namespace hilo {
namespace internal {

// Makes a directory entry durable: fsyncs `dir`, so that a file or
// directory just created in it survives a power loss. Tells
// options.directory_synced_for_testing. UNAVAILABLE if it cannot.
absl::Status FsyncDirectory(const std::string& dir,
                            const SqliteRangeStoreOptions& options);

// Creates the missing directories of `dir`, each mode 0700 whatever the
// umask, and makes each new entry durable by flushing its parent.
// UNAVAILABLE naming options.path if it cannot.
absl::Status CreateDirectoriesDurably(const std::filesystem::path& dir,
                                      const SqliteRangeStoreOptions& options);

// Creates `path` empty with mode 0600 whatever the umask, if no file is
// there (SQLite makes an empty file a new database and gives its -wal and
// -shm files the database's mode). UNAVAILABLE if it cannot.
absl::Status CreateOwnerOnlyFile(const std::string& path);

// The error of `rc` on connection `db` of database `path`, doing `what`:
// UNAVAILABLE for a lock, I/O or open failure (another attempt may
// succeed), RESOURCE_EXHAUSTED for a full disk, INTERNAL otherwise.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what,
                         absl::string_view path);

// Runs `sql` (one or more statements) on `db`; an error names it.
absl::Status SqliteExec(sqlite3* db, const char* sql, absl::string_view path);

// The first column of the first row of `sql` (a PRAGMA or a count).
absl::StatusOr<int64_t> SqliteReadInt(sqlite3* db, const char* sql,
                                      absl::string_view path);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_H_
