// What SqliteRangeStore is opened with: the file, how hard a commit waits
// for the disk, batching, and the test hooks. Apart from the store so that
// the parts it is made of (the file, its schema) can take its options
// without including the store.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_OPTIONS_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "service/store/group_commit.h"
#include "service/store/range_store.h"

namespace hilo {

// How hard a commit waits for the disk.
enum class SyncMode {
  // A range's reservation is on disk before its reply: a commit that
  // raises a ceiling fsyncs the WAL, and every range is under a ceiling
  // (sqlite_reservations.h); after a crash of the machine the store moves
  // each collection to its ceiling.
  kFull,
  // fsync only at checkpoints: faster, but a power loss (not a process crash)
  // may lose the last commits, and a restarted node could reissue numbers.
  kNormal,
};

// Parses "full" or "normal".
absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view text);
absl::string_view SyncModeName(SyncMode mode);

struct SqliteRangeStoreOptions {
  // The database file; missing parent directories are created, each mode
  // 0700, and a new file is 0600 (its -wal and -shm too), whatever the
  // umask.
  std::string path;
  // Whether Open may make a new database: create a missing file (and its
  // directories), or give an empty one (0 bytes, or SQLite without tables)
  // hilo's schema. A new database hands out every number from 1 again, so
  // hilo_server allows it only with --create_db. False: Open refuses with
  // NOT_FOUND and makes nothing.
  bool create_if_missing = true;
  // How often a thread of the store checks that `path` (and its -wal) still
  // names the file the store opened (see SqliteFileGuard); it is checked
  // before each COMMIT too. Zero: no thread (tests call CheckFile).
  absl::Duration file_check_interval = absl::Seconds(1);
  // Runs once when a check finds that the file was deleted or replaced,
  // with a status naming the path and what happened; from then on every
  // operation fails with UNAVAILABLE (internal::kFileLostMessage, naming no
  // path). Runs on the checking thread (the store's, or the one that ran
  // the batch, after it), with no lock of the store held; it may end the
  // process.
  std::function<void(const absl::Status&)> on_file_lost;
  // The node tag the database issues under. Stored in the file when it has
  // none (at creation, or at the first open of an older file); an open under
  // another tag is FAILED_PRECONDITION naming both, so a file never hands
  // its numbers out under a tag that did not issue them. Empty: neither
  // stored nor checked (tools, tests).
  std::string node_tag;
  // Re-tags on purpose: a file tagged `retag_from` is stored as node_tag
  // and opens. The operator guarantees that no IDs of node_tag can collide
  // with this file's (service/store/sqlite/README.md). Empty: never.
  std::string retag_from;
  SyncMode sync = SyncMode::kFull;
  // The boot of the machine (and the file's mount), which the file records
  // while the store has it open (sqlite_reservations.h): a start that finds
  // the mark of another moves every collection to its ceiling. Empty: the
  // kernel's boot id and the file's mount id (tests set their own to play a
  // machine's restart).
  std::string machine_boot;
  // Told, once Open is done, when it found that the machine went down, the
  // file system was mounted anew or the file moved to another machine while
  // a server had the file open, and moved
  // collections past what its lost commits may have handed out. On the
  // thread that called Open.
  std::function<void(const StoreHistoryEvent&)> on_history_went_back;
  // Most operations folded into one transaction; 1 commits each alone.
  int max_batch = 256;
  // How long to wait for another process's lock before UNAVAILABLE.
  absl::Duration busy_timeout = absl::Seconds(2);
  // Source of updated_at. Null means SystemClock.
  const Clock* clock = nullptr;
  // Told about each commit: how long COMMIT took and how many operations
  // the transaction held. Runs on the write queue's thread; keep it quick.
  // `collections` is the number of rows after the commit.
  std::function<void(absl::Duration commit, int operations,
                     int64_t collections)>
      on_commit;
  // Test hook: runs on the thread running the batch right before each
  // COMMIT; a status other than OK fails the commit with it, as a full disk
  // would.
  std::function<absl::Status()> before_commit_for_testing;
  // Test hook: runs on the thread running the batch before each row's
  // write; a status other than OK is taken as the write failing with it.
  std::function<absl::Status()> before_write_for_testing;
  // Rows held in memory between batches (at least the rows one batch
  // touches); a row dropped is read from the file again when next used.
  size_t max_held_rows = size_t{1} << 17;
  // Test hook: told each directory Open flushed to disk, in order.
  std::function<void(const std::string& dir)> directory_synced_for_testing;
  // Opens an existing database for Get and List only, as a tool that
  // inspects a stopped server's file does: no collection is created, no
  // schema migrated, no row written (not even a checkpoint, so a WAL a
  // killed server left behind keeps its frames), and every write fails with
  // FAILED_PRECONDITION. SQLite may still create the -wal and -shm files
  // beside a database that has none, or rebuild the -shm index. The file
  // must hold the current schema version.
  bool read_only = false;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_OPTIONS_H_
