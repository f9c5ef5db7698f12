#include "service/store/sqlite/sqlite_reservations.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "service/store/sqlite/sqlite_file.h"

namespace hilo {
namespace internal {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A boot the file recorded that matches no machine's: written when this
// one's cannot be read, so the next start moves every row.
constexpr char kUnknownBoot[] = "unknown";

// Whether `file` (null: not open) reports powersafe overwrite.
bool FileHasPowersafeOverwrite(sqlite3_file* file) {
  if (file == nullptr || file->pMethods == nullptr) return false;
  return (file->pMethods->xDeviceCharacteristics(file) &
          SQLITE_IOCAP_POWERSAFE_OVERWRITE) != 0;
}

}  // namespace

SqliteReservations::SqliteReservations(Loader load, size_t max_rows,
                                       absl::Duration reserve_for)
    : load_(std::move(load)), max_rows_(max_rows), reserve_for_(reserve_for) {}

absl::StatusOr<bool> SqliteReservations::Plan(
    const std::vector<SqliteHeldRows::Change>& changes, absl::Time now) {
  planned_.clear();
  planned_.reserve(changes.size());
  bool must_sync = false;
  for (const SqliteHeldRows::Change& change : changes) {
    Planned& plan = planned_.emplace_back();
    plan.name = std::string(change.name);
    // Made, deleted or retired: the row's being there is what a crash of
    // the machine must not take back.
    if (!change.row->has_value() || !change.stored->has_value() ||
        change.retired_max.has_value()) {
      must_sync = true;
      if (!change.row->has_value()) continue;
    }
    auto it = held_.find(change.name);
    Held held;
    if (it != held_.end()) {
      held = it->second;
    } else {
      absl::StatusOr<int64_t> loaded = load_(change.name);
      if (!loaded.ok()) {
        planned_.clear();
        return loaded.status();
      }
      held.ceiling = *loaded;
    }
    const int64_t max = (*change.row)->max;
    if (max > held.ceiling || !change.stored->has_value()) {
      if (held.reserved_at != absl::InfinitePast()) {
        const absl::Duration lasted = now - held.reserved_at;
        if (lasted < reserve_for_) {
          held.reach = std::min(held.reach * 2, kMaxReach);
        } else if (lasted > reserve_for_ * 16) {
          held.reach = std::max(held.reach / 2, kMinReach);
        }
      }
      held.ceiling =
          std::max(held.ceiling,
                   max > kInt64Max - held.reach ? kInt64Max : max + held.reach);
      held.reserved_at = now;
      must_sync = true;
    }
    plan.after = held;
  }
  return must_sync;
}

int64_t SqliteReservations::ceiling(size_t i) const {
  return planned_[i].after.has_value() ? planned_[i].after->ceiling : 0;
}

void SqliteReservations::Commit() {
  for (Planned& plan : planned_) {
    if (plan.after.has_value()) {
      held_.insert_or_assign(std::move(plan.name), *plan.after);
    } else if (auto it = held_.find(plan.name); it != held_.end()) {
      held_.erase(it);
    }
  }
  planned_.clear();
  if (held_.size() > max_rows_) {
    // Any dropped is read again when next used (its reach starts anew).
    const size_t keep = max_rows_ - max_rows_ / 4;
    for (auto it = held_.begin(); it != held_.end() && held_.size() > keep;) {
      held_.erase(it++);
    }
  }
}

void SqliteReservations::Abort() { planned_.clear(); }

std::optional<std::string> ReadMachineBoot() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot)) return std::nullopt;
  absl::StripAsciiWhitespace(&boot);
  if (boot.empty() || boot == kUnknownBoot) return std::nullopt;
  return boot;
}

std::optional<FileMount> ReadFileMount(const std::string& path) {
  // Linux 6.8's unique mount id; Debian 12's headers predate it.
  constexpr unsigned int kUniqueMountId = 0x4000;
  struct statx st;
  if (statx(AT_FDCWD, path.c_str(), 0, STATX_MNT_ID | kUniqueMountId, &st) !=
      0) {
    return std::nullopt;
  }
  if ((st.stx_mask & kUniqueMountId) != 0) {
    return FileMount{.id = st.stx_mnt_id, .unique = true};
  }
  if ((st.stx_mask & STATX_MNT_ID) != 0) {
    return FileMount{.id = st.stx_mnt_id, .unique = false};
  }
  return std::nullopt;
}

std::optional<std::string> ReadRunningSession(const std::string& path) {
  std::optional<std::string> boot = ReadMachineBoot();
  if (!boot.has_value()) return std::nullopt;
  std::optional<FileMount> mount = ReadFileMount(path);
  if (!mount.has_value()) return boot;
  return absl::StrCat(*boot, " mount ", mount->id,
                      mount->unique ? "" : " reusable");
}

bool HasPowersafeOverwrite(sqlite3* db) {
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) !=
          SQLITE_OK ||
      !FileHasPowersafeOverwrite(file)) {
    return false;
  }
  // SQLite decides how to write the log by the log's own flag.
  sqlite3_file* log = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &log) !=
      SQLITE_OK) {
    return false;
  }
  return log == nullptr || log->pMethods == nullptr ||
         FileHasPowersafeOverwrite(log);
}

absl::StatusOr<RunningMark> MarkRunning(sqlite3* db, absl::string_view path,
                                        const std::optional<std::string>& boot,
                                        absl::Time now, int64_t* skipped) {
  *skipped = 0;
  if (absl::Status s = SqliteExec(db, "BEGIN IMMEDIATE", path); !s.ok()) {
    return s;
  }
  RunningMark mark;
  auto run = [&]() -> absl::Status {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(
        db, "SELECT value FROM node WHERE key = 'running'", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    std::optional<std::string> left;
    if (rc == SQLITE_ROW) {
      left.emplace(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                   sqlite3_column_bytes(stmt, 0));
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      return SqliteError(db, rc, "reading the running mark", path);
    }
    if (left.has_value() && (!boot.has_value() || *left != *boot)) {
      // The machine went down (or the file moved) while a server had the
      // file open: its last commits may be lost, never a ceiling.
      mark.left_by_another_boot = true;
      absl::StatusOr<int64_t> ahead = SqliteReadInt(
          db, "SELECT count(*) FROM collections WHERE ceiling > max", path);
      if (!ahead.ok()) return ahead.status();
      mark.moved = *ahead;
      // total() sums in floating point: no overflow to report.
      stmt = nullptr;
      rc = sqlite3_prepare_v2(
          db,
          "SELECT total(ceiling - max) FROM collections WHERE ceiling > max",
          -1, &stmt, nullptr);
      if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const double total = sqlite3_column_double(stmt, 0);
        *skipped = total >= 9.2e18 ? kInt64Max : static_cast<int64_t>(total);
      }
      sqlite3_finalize(stmt);
      if (rc != SQLITE_ROW) {
        return SqliteError(db, rc, "counting the numbers skipped", path);
      }
      rc = sqlite3_prepare_v2(
          db,
          "UPDATE collections SET max = max(max, ceiling), "
          "return_floor = max(max, ceiling), range_token = 0, "
          "previous_token = 0, previous_return_floor = 0, "
          "updated_at_us = ?1",
          -1, &stmt, nullptr);
      if (rc == SQLITE_OK) {
        sqlite3_bind_int64(stmt, 1, absl::ToUnixMicros(now));
        rc = sqlite3_step(stmt);
      }
      sqlite3_finalize(stmt);
      if (rc != SQLITE_DONE) {
        return SqliteError(db, rc, "moving collections to their ceilings",
                           path);
      }
    }
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO node(key, value) VALUES('running', "
                            "?1) ON CONFLICT(key) DO UPDATE SET value = "
                            "excluded.value",
                            -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      const std::string value = boot.value_or(kUnknownBoot);
      sqlite3_bind_text(stmt, 1, value.data(), static_cast<int>(value.size()),
                        SQLITE_TRANSIENT);
      rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
      return SqliteError(db, rc, "recording the running mark", path);
    }
    return absl::OkStatus();
  };
  absl::Status s = run();
  if (s.ok()) s = SqliteExec(db, "COMMIT", path);
  if (!s.ok()) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    *skipped = 0;
    return s;
  }
  return mark;
}

absl::Status MarkFlushFailed(sqlite3* db, absl::string_view path) {
  return SqliteExec(db,
                    "UPDATE node SET value = 'flush-failed' WHERE key = "
                    "'running'",
                    path);
}

absl::Status MarkStopped(sqlite3* db, absl::string_view path) {
  return SqliteExec(db, "DELETE FROM node WHERE key = 'running'", path);
}

}  // namespace internal
}  // namespace hilo
