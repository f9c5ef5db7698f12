#include "service/store/sqlite/sqlite_file.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo {
namespace internal {
namespace {

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

absl::Status FsyncDirectory(const std::string& dir,
                            const SqliteRangeStoreOptions& options) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrFormat(
        "cannot flush directory %s to disk: %s", dir, strerror(err)));
  }
  close(fd);
  if (options.directory_synced_for_testing) {
    options.directory_synced_for_testing(dir);
  }
  return absl::OkStatus();
}

absl::Status CreateDirectoriesDurably(const std::filesystem::path& dir,
                                      const SqliteRangeStoreOptions& options) {
  std::vector<std::filesystem::path> missing;  // deepest first
  std::error_code ec;
  for (std::filesystem::path p = dir; !p.empty() && p != p.root_path();
       p = p.parent_path()) {
    if (std::filesystem::exists(p, ec)) break;
    missing.push_back(p);
  }
  if (missing.empty() && !std::filesystem::is_directory(dir, ec)) {
    return absl::UnavailableError(
        absl::StrFormat("cannot create directory %s for database %s: %s",
                        dir.string(), options.path, strerror(ENOTDIR)));
  }
  // Shallowest first, each owner-only whatever the umask: the directory
  // holds the database, which no other user has any business reading.
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrFormat("cannot create directory %s for database %s: %s",
                          it->string(), options.path, strerror(errno)));
    }
    if (chmod(it->c_str(), 0700) != 0) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot make directory %s for database %s owner-only: %s",
          it->string(), options.path, strerror(errno)));
    }
    std::filesystem::path parent = it->parent_path();
    if (parent.empty()) parent = ".";
    if (absl::Status s = FsyncDirectory(parent.string(), options); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CreateOwnerOnlyFile(const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrFormat("cannot open database %s: %s", path, strerror(errno)));
  }
  const int rc = fchmod(fd, 0600);
  const int err = errno;
  close(fd);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot make database %s owner-only: %s", path, strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what,
                         absl::string_view path) {
  const int errcode = sqlite3_extended_errcode(db);
  const char* message = errcode == rc ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(CodeForSqlite(rc),
                      absl::StrFormat("%s on database %s: %s (SQLite code %d)",
                                      what, path, message, rc));
}

absl::Status SqliteExec(sqlite3* db, const char* sql, absl::string_view path) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db, rc, absl::StrCat("\"", sql, "\""), path);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteReadInt(sqlite3* db, const char* sql,
                                      absl::string_view path) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  int64_t value = 0;
  if (rc == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return SqliteError(db, rc, sql, path);
  return value;
}

}  // namespace internal
}  // namespace hilo
