#include "service/store/sqlite/sqlite_file_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hilo {
namespace internal {
namespace {

FileIdentity IdentityOf(const struct stat& st) {
  return FileIdentity{st.st_dev, st.st_ino};
}

// What `path` names now, compared with `opened`: nullopt if it is the same
// file (or a stat fails for a reason that proves nothing), else what
// happened, in words.
std::optional<std::string> Compare(const std::string& path,
                                   const FileIdentity& opened) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::string("deleted");
    return std::nullopt;
  }
  if (IdentityOf(st) == opened) return std::nullopt;
  return absl::StrFormat("replaced by another file (inode %d, was %d)",
                         st.st_ino, opened.inode);
}

}  // namespace

pid_t FlockHolder(ino_t inode) {
  // Lines look like "3: FLOCK  ADVISORY  WRITE 4242 08:02:1234567 0 EOF";
  // a waiter's line has "->" after the number and is skipped.
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::vector<std::string> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 6 || fields[1] != "FLOCK") continue;
    std::vector<std::string> id = absl::StrSplit(fields[5], ':');
    uint64_t ino = 0;
    int pid = 0;
    if (id.size() == 3 && absl::SimpleAtoi(id[2], &ino) && ino == inode &&
        absl::SimpleAtoi(fields[4], &pid)) {
      return pid;
    }
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<SqliteFileGuard>> SqliteFileGuard::Acquire(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot open database %s: %s", path, strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrFormat("cannot stat database %s: %s", path, strerror(err)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrFormat("cannot lock database %s: %s", path, strerror(err)));
    }
    const pid_t holder = FlockHolder(st.st_ino);
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s is already served by another hilo_server%s, which "
        "holds its lock; one file serves one server: stop the other, or "
        "give this one its own --db",
        path, holder > 0 ? absl::StrFormat(" (pid %d)", holder) : ""));
  }
  return std::unique_ptr<SqliteFileGuard>(
      new SqliteFileGuard(path, fd, IdentityOf(st)));
}

SqliteFileGuard::SqliteFileGuard(std::string path, int fd,
                                 FileIdentity identity)
    : path_(std::move(path)),
      wal_path_(path_ + "-wal"),
      fd_(fd),
      identity_(identity) {}

SqliteFileGuard::~SqliteFileGuard() {
  StopWatching();
  close(fd_);  // releases the lock
}

void SqliteFileGuard::StopWatching() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t SqliteFileGuard::Size() const {
  struct stat st;
  return fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

absl::Status SqliteFileGuard::Watch(
    absl::Duration interval, std::function<void(const absl::Status&)> on_lost) {
  if (std::optional<std::string> what = Compare(path_, identity_)) {
    return absl::UnavailableError(absl::StrFormat(
        "database %s was %s while it was being opened", path_, *what));
  }
  {
    base::MutexLock lock(&mu_);
    on_lost_ = std::move(on_lost);
    struct stat st;
    if (stat(wal_path_.c_str(), &st) == 0) wal_identity_ = IdentityOf(st);
  }
  if (interval > absl::ZeroDuration()) {
    thread_ = std::thread([this, interval] { Run(interval); });
  }
  return absl::OkStatus();
}

absl::Status SqliteFileGuard::Check() {
  if (!lost()) {
    std::optional<std::string> what = Compare(path_, identity_);
    std::string detail;
    if (what.has_value()) {
      detail = absl::StrFormat(
          "database %s was %s while this server had it open", path_, *what);
    } else {
      std::optional<FileIdentity> wal;
      {
        base::MutexLock lock(&mu_);
        wal = wal_identity_;
      }
      if (wal.has_value()) {
        if (std::optional<std::string> wal_what = Compare(wal_path_, *wal)) {
          detail = absl::StrFormat(
              "database %s lost its write-ahead log: %s was %s while this "
              "server had it open, and with it the latest commits",
              path_, wal_path_, *wal_what);
        }
      }
    }
    if (detail.empty()) return absl::OkStatus();
    base::MutexLock lock(&mu_);
    if (!lost()) {
      detail_ = absl::UnavailableError(detail);
      lost_.store(true, std::memory_order_release);
    }
  }
  return absl::UnavailableError(kFileLostMessage);
}

void SqliteFileGuard::ReportIfLost() {
  if (!lost() || reported_.exchange(true)) return;
  std::function<void(const absl::Status&)> on_lost;
  absl::Status detail;
  {
    base::MutexLock lock(&mu_);
    on_lost = on_lost_;
    detail = detail_;
  }
  if (on_lost) on_lost(detail);
}

void SqliteFileGuard::Run(absl::Duration interval) {
  for (;;) {
    {
      base::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(
              [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
              interval)) {
        return;
      }
    }
    Check().IgnoreError();
    if (lost()) {
      ReportIfLost();
      return;
    }
  }
}

}  // namespace internal
}  // namespace hilo
