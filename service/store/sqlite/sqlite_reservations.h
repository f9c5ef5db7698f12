// The SQLite store's reservations: why most of its commits need not wait
// for the disk, and how it stays right when the machine goes down.
//
// With --sync=full a COMMIT that fsyncs its log costs the disk's flush
// time (milliseconds on most disks); one that does not costs microseconds,
// but a crash of the machine (not of the process: the kernel still holds
// what it wrote) may lose it. So every row of `collections` keeps, besides
// Max, a *ceiling*: the highest number the store may hand out from it
// without waiting for the disk. A batch whose rows all stay at or under
// ceilings already on disk commits without fsync; a batch that needs more
// raises the ceiling of each row past its new Max by the row's *reach*
// and commits with fsync, so the ceiling is on disk before any number
// under it leaves. A batch that creates, deletes or retires a row commits
// with fsync too (a row deleted and made again within one batch counts as
// changed: a crash that loses it leaves the old row, moved to its ceiling,
// which covers the new row's numbers).
//
// Whatever a crash of the machine loses, then, is a suffix of the log
// (SQLite's write-ahead log keeps commits in order, and an fsync covers
// every commit before it): each row the file keeps has a ceiling at or
// above every number handed out from it. The next start moves every row
// to its ceiling (Max = return floor = ceiling, tokens retired, as a
// SetFloor would), skipping at most one reach of numbers per collection.
//
// Telling a crash of the machine from one of the process. While a server
// has the file open, table `node` holds key 'running' with the boot of the
// machine (the kernel's boot id, /proc/sys/kernel/random/boot_id); a clean
// close removes it. A start that finds it left by this same boot knows the
// process died and the kernel kept every commit: it moves nothing, and a
// `kill -9` costs no numbers. Left by another boot (the machine crashed or
// restarted, or the file came from another machine), or with the boot
// unknown, it moves every row. The mark also names the mount the file is
// on, so a volume detached and attached again while the machine ran
// (whose unwritten pages went with the old mount) moves every row too
// where the kernel numbers mounts uniquely (Linux 6.8 and later).
//
// The reach of a row starts at kMinReach numbers and doubles each time a
// reservation lasted less than `reserve_for` (1 s), halving when one
// lasted more than 16 times that; it is held in memory, per collection, by
// the batch writer, and starts again at the minimum after a restart. A
// collection handing out a million numbers a second so reserves a few
// seconds' worth at a time, and commits with fsync a few times a second.
//
// Not thread-safe: the batch writer uses it under its own lock.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_RESERVATIONS_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_RESERVATIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/range_store.h"
#include "service/store/sqlite/sqlite_held_rows.h"

struct sqlite3;

namespace hilo {
namespace internal {

class SqliteReservations {
 public:
  // The numbers a first reservation reaches past Max: 32 ranges of the
  // default size.
  static constexpr int64_t kMinReach = 1024;
  static constexpr int64_t kMaxReach = int64_t{1} << 40;

  // Reads a row's ceiling from the file (0 if it has no row), inside the
  // batch's transaction.
  using Loader = std::function<absl::StatusOr<int64_t>(absl::string_view name)>;

  // `max_rows`: ceilings held between batches; any dropped is read again.
  SqliteReservations(Loader load, size_t max_rows,
                     absl::Duration reserve_for = absl::Seconds(1));

  // Plans a batch's changes (SqliteHeldRows::Changes, judged at `now`):
  // the ceiling each changed row is written with (ceiling()), and whether
  // the COMMIT must wait for the disk. The loader's error if a ceiling
  // cannot be read. Then Commit() or Abort().
  absl::StatusOr<bool> Plan(const std::vector<SqliteHeldRows::Change>& changes,
                            absl::Time now);
  // The ceiling Plan chose for changes[i], to be written with its row.
  int64_t ceiling(size_t i) const;
  // The batch is in the file (its ceilings on disk once a commit that
  // waits for the disk has run, which Plan asked for where they rose).
  void Commit();
  // Nothing of the batch is in the file.
  void Abort();

  // Ceilings held now.
  size_t size() const { return held_.size(); }

 private:
  struct Held {
    int64_t ceiling = 0;  // as the file holds it
    int64_t reach = kMinReach;
    // When the ceiling was last raised here; InfinitePast: not by this
    // store.
    absl::Time reserved_at = absl::InfinitePast();
  };
  struct Planned {
    std::string name;
    std::optional<Held> after;  // nullopt: the row is gone
  };

  const Loader load_;
  const size_t max_rows_;
  const absl::Duration reserve_for_;
  std::map<std::string, Held, std::less<>> held_;
  std::vector<Planned> planned_;
};

// The boot of the machine this process runs on, as the kernel names it;
// nullopt if it cannot be read.
std::optional<std::string> ReadMachineBoot();

// The mount that holds `path`, as the kernel numbers it (statx).
struct FileMount {
  uint64_t id = 0;
  // Linux 6.8 and later: an id no other mount gets while the machine runs,
  // so a file system detached and attached again (a network volume, say) is
  // always another mount. Before: the id of a mount that went away may be
  // given to the next one.
  bool unique = false;
};
// nullopt if the kernel does not say (before Linux 5.8).
std::optional<FileMount> ReadFileMount(const std::string& path);

// What the running mark of the file at `path` records: the machine's boot
// and the file's mount, "BOOT mount ID" ("BOOT mount ID reusable" where
// mount ids are reused, "BOOT" alone if the mount is unknown); nullopt if
// the boot is unknown. A start that finds the mark of another mount moves
// every row, as after another boot: pages the kernel held for the old
// mount and never wrote are gone with it.
std::optional<std::string> ReadRunningSession(const std::string& path);

// Whether the database file of `db` and its write-ahead log (if open) say
// a write never harms the bytes around it at a power cut
// (SQLITE_IOCAP_POWERSAFE_OVERWRITE, Debian's default; off where SQLite was
// built or the file opened with psow=0). Reservations need it: a flushed
// commit must survive a later unflushed write into the same sector of the
// log.
bool HasPowersafeOverwrite(sqlite3* db);

// What MarkRunning found.
struct RunningMark {
  // A server left the file open under another boot (or an unknown one).
  bool left_by_another_boot = false;
  // The rows it moved past their Max.
  int64_t moved = 0;
};

// At a writable open, in one transaction: if a server left the file open
// (key 'running' of table `node`) under a boot other than `boot` (or an
// unknown one), moves every row to its ceiling, tokens retired; then
// records `boot` (nullopt: unknown) as the running one. `*skipped`: the
// numbers the rows moved past, saturating. `now` is the rows' updated_at.
// The connection's synchronous setting must make this COMMIT wait for the
// disk.
absl::StatusOr<RunningMark> MarkRunning(sqlite3* db, absl::string_view path,
                                        const std::optional<std::string>& boot,
                                        absl::Time now, int64_t* skipped);

// At the close of a store whose flush of the log failed: records a running
// mark no boot matches, so the next start moves every row (the kernel may
// keep pages it failed to write, and a start on the same boot would trust
// them).
absl::Status MarkFlushFailed(sqlite3* db, absl::string_view path);

// At a clean close, after the last batch: removes the running mark, with
// a COMMIT that waits for the disk (the batches before it are on disk
// with it, in the log's order).
absl::Status MarkStopped(sqlite3* db, absl::string_view path);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_RESERVATIONS_H_
