// SqliteFileGuard: keeps a running store on the one database file it opened,
// and keeps every other writer off it.
//
// Two things make a node hand out numbers it already handed out: a second
// server on its file (two processes draw from one file under one tag), and
// a file that goes away under a running server (`rm hilo.db*`, or another
// file moved over it): the server goes on writing into a file nobody will
// ever open again, and its next start begins anew. So the guard
//
// - holds an exclusive flock(2) on the database file itself for as long as
//   the store is open; a second Acquire, in this process or another, is
//   refused. The kernel drops the lock when the process dies, kill -9
//   included. (flock, not fcntl: SQLite's own locks on the file are fcntl
//   locks, which the two kinds do not disturb on Linux, and closing a
//   descriptor of the file would drop SQLite's fcntl locks; the guard's
//   descriptor is closed only after SQLite closed its connections.)
// - remembers which file it locked (device and inode), and that of the
//   -wal file beside it, and checks that the path still names them: every
//   `interval` on a thread of its own, and whenever Check is called (the
//   store calls it before each COMMIT: a stat(2) or two, about a
//   microsecond). Once they differ the guard is lost for good: Check
//   returns UNAVAILABLE with kFileLostMessage, and on_lost runs once.
//
//   auto guard = SqliteFileGuard::Acquire("/var/lib/hilo/hilo.db");
//   ... open SQLite on the file ...
//   (*guard)->Watch(absl::Seconds(1), on_lost);
//
// Thread-safe. The destructor stops the thread and then releases the lock.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_GUARD_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_GUARD_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"

namespace hilo {
namespace internal {

// What a client is told once the file is lost: no path in it.
inline constexpr char kFileLostMessage[] =
    "the server's database file was removed or replaced; this node stops "
    "serving";

// A file as the kernel knows it.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  friend bool operator==(const FileIdentity& a, const FileIdentity& b) {
    return a.device == b.device && a.inode == b.inode;
  }
};

class SqliteFileGuard {
 public:
  // Opens `path` (an existing file; give it absolute, as it is named in
  // messages and checked against) and takes the lock without waiting.
  // FAILED_PRECONDITION naming the path if another holder has it (with that
  // holder's pid, when /proc/locks tells it); UNAVAILABLE if the file
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<SqliteFileGuard>> Acquire(
      const std::string& path);

  ~SqliteFileGuard();
  SqliteFileGuard(const SqliteFileGuard&) = delete;
  SqliteFileGuard& operator=(const SqliteFileGuard&) = delete;

  // The locked file's size in bytes now.
  int64_t Size() const;

  // Starts watching, once the store has opened the file: checks at once
  // that the path still names the locked file (UNAVAILABLE naming the path
  // if not: it was replaced while the store opened it), records the -wal
  // file's identity if there is one, and from then on checks every
  // `interval` on a thread of its own (zero: no thread; then only Check
  // checks). `on_lost` gets a status naming the path and what happened; it
  // runs once, on the thread of the check that found it (the guard's own,
  // or the one calling ReportIfLost), and may end the process.
  absl::Status Watch(absl::Duration interval,
                     std::function<void(const absl::Status&)> on_lost);

  // Compares what the paths name now with the files opened: OK while they
  // agree (and before Watch); UNAVAILABLE with kFileLostMessage, from this
  // and every later call, once they do not. A stat that fails for another
  // reason than a missing file (EACCES, EIO) proves nothing and counts as
  // agreeing. Does not run on_lost (see ReportIfLost): callers may hold
  // locks the callback needs.
  absl::Status Check() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a check found the file lost. Cheap: one atomic load.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // Runs on_lost if a check found the file lost and nobody ran it yet.
  void ReportIfLost() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the watch thread and waits for it (idempotent); Check still
  // works. Call it before closing SQLite's connections: the last close
  // deletes the -wal file, which the thread would take for a lost log.
  void StopWatching() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  SqliteFileGuard(std::string path, int fd, FileIdentity identity);
  void Run(absl::Duration interval) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  const std::string wal_path_;
  const int fd_;
  const FileIdentity identity_;
  std::atomic<bool> lost_{false};
  std::atomic<bool> reported_{false};
  base::Mutex mu_;
  std::optional<FileIdentity> wal_identity_ ABSL_GUARDED_BY(mu_);
  std::function<void(const absl::Status&)> on_lost_ ABSL_GUARDED_BY(mu_);
  // What happened, naming the path; set with lost_.
  absl::Status detail_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The pid of the process holding a flock on the file with inode `inode`,
// from /proc/locks; 0 if none is listed or it cannot be read.
pid_t FlockHolder(ino_t inode);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_FILE_GUARD_H_
