// The SQLite store's reservations (sqlite_reservations.h): which commits
// wait for the disk, and what a start after a power cut hands out. The disk
// is testing_util::SqlitePowerCut, which keeps what each file held at its
// last sync, so a power cut leaves exactly that.
#include "service/store/sqlite/sqlite_reservations.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/range_store_fixture.h"
#include "testing/sqlite_power_cut.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::SqlitePowerCut;
using ::hilo::testing_util::TempDir;

constexpr int64_t kReach = internal::SqliteReservations::kMinReach;

class SqliteReservationsTest : public ::testing::Test {
 protected:
  // Opens the store on `boot`, through the power-cut disk.
  void Open(const std::string& boot) {
    SqliteRangeStoreOptions options;
    options.path = path_;
    options.machine_boot = boot;
    options.clock = &clock_;
    options.file_check_interval = absl::ZeroDuration();
    options.on_history_went_back = [this](const StoreHistoryEvent& e) {
      events_.push_back(e);
    };
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
  }

  // A range of 32 from "orders", every number of it recorded.
  Range Next() {
    absl::StatusOr<Range> range =
        store_->Allocate("orders", 32, 0, NextToken());
    EXPECT_THAT(range, IsOk());
    if (!range.ok()) return Range{};
    handed_out_.push_back(*range);
    return *range;
  }

  // The power goes: the store's files become what the disk kept, and the
  // store's process is gone (its clean close, which would sync, is undone).
  void CutPower() {
    SqlitePowerCut::Disk disk = power_.Durable();
    store_.reset();
    SqlitePowerCut::Restore(disk);
  }

  // Max of "orders" as the file holds it, read without a server.
  int64_t StoredMax() {
    SqliteRangeStoreOptions options;
    options.path = path_;
    options.read_only = true;
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    EXPECT_THAT(store, IsOk());
    if (!store.ok()) return -1;
    absl::StatusOr<std::optional<CollectionState>> row =
        (*store)->Get("orders");
    EXPECT_TRUE(row.ok() && row->has_value());
    return row.ok() && row->has_value() ? (*row)->max : -1;
  }

  // Fails the test if a number was handed out twice.
  void ExpectNoNumberTwice() {
    std::vector<Range> sorted = handed_out_;
    std::sort(sorted.begin(), sorted.end(),
              [](const Range& a, const Range& b) { return a.low < b.low; });
    for (size_t i = 1; i < sorted.size(); ++i) {
      EXPECT_GT(sorted[i].low, sorted[i - 1].high)
          << "handed out twice: " << sorted[i - 1].low << "-"
          << sorted[i - 1].high << " and " << sorted[i].low << "-"
          << sorted[i].high;
    }
  }

  TempDir dir_;
  const std::string path_ = dir_.File("hilo.db");
  ManualClock clock_{absl::FromUnixSeconds(1800000000)};
  SqlitePowerCut power_;  // outlives every store
  std::unique_ptr<SqliteRangeStore> store_;
  std::vector<Range> handed_out_;
  std::vector<StoreHistoryEvent> events_;
};

TEST_F(SqliteReservationsTest, RangesUnderTheCeilingDoNotWaitForTheDisk) {
  Open("boot-1");
  ASSERT_TRUE(events_.empty());
  int syncs = power_.syncs("-wal");
  // The collection's first range makes its row and reserves kReach past it.
  EXPECT_EQ(Next(), (Range{1, 32}));
  EXPECT_GE(power_.syncs("-wal"), syncs + 1);
  syncs = power_.syncs("-wal");
  for (int64_t high = 64; high <= 32 + kReach; high += 32) {
    EXPECT_EQ(Next(), (Range{high - 31, high}));
  }
  EXPECT_EQ(power_.syncs("-wal"), syncs) << "a range under the ceiling synced";
  // The first range past it reserves again, and waits for the disk.
  EXPECT_EQ(Next(), (Range{33 + kReach, 64 + kReach}));
  EXPECT_EQ(power_.syncs("-wal"), syncs + 1);
}

// Without powersafe overwrite a power cut during one commit's write may
// tear the flushed commit beside it in the log, reservation and all: every
// commit then waits for the disk, as before reservations.
TEST_F(SqliteReservationsTest, WithoutPowersafeOverwriteEveryCommitWaits) {
  power_.ClearPowersafeOverwrite();
  Open("boot-1");
  EXPECT_EQ(Next(), (Range{1, 32}));
  for (int64_t high = 64; high <= 32 * 5; high += 32) {
    const int syncs = power_.syncs("-wal");
    EXPECT_EQ(Next(), (Range{high - 31, high}));
    EXPECT_GE(power_.syncs("-wal"), syncs + 1)
        << "a range under the ceiling did not wait for the disk";
  }
  // A power cut loses nothing that was handed out.
  CutPower();
  EXPECT_EQ(StoredMax(), 32 * 5);
}

TEST_F(SqliteReservationsTest, APowerCutSkipsToTheCeilingAndRepeatsNothing) {
  Open("boot-1");
  // 1-32 reserves to 32 + kReach; 33+kReach.. to (64+kReach) + 2*kReach
  // (each reservation lasted less than a second: the reach doubles); the
  // third to (96+3*kReach) + 4*kReach. 100 ranges end at 3200, under it.
  for (int i = 0; i < 100; ++i) Next();
  ASSERT_EQ(handed_out_.back(), (Range{3169, 3200}));
  const int64_t last_synced_max = 96 + 3 * kReach;
  const int64_t ceiling = last_synced_max + 4 * kReach;
  CutPower();
  // The ranges after the last reservation were lost with the power...
  EXPECT_EQ(StoredMax(), last_synced_max);
  // ...and the next start, on another boot, moves to the ceiling.
  Open("boot-2");
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].collections, 1);
  EXPECT_EQ(events_[0].numbers_skipped, ceiling - last_synced_max);
  EXPECT_EQ(Next(), (Range{ceiling + 1, ceiling + 32}));
  ExpectNoNumberTwice();
}

TEST_F(SqliteReservationsTest, APowerCutRetiresTheTokensOfRangesOut) {
  Open("boot-1");
  const uint64_t token = NextToken();
  ASSERT_EQ(store_->Allocate("orders", 32, 0, token).value(), (Range{1, 32}));
  CutPower();
  Open("boot-2");
  // Its range may have been followed by others the cut lost: a return of
  // its tail could hand back numbers now beyond it.
  absl::StatusOr<ReturnOutcome> back = store_->Return("orders", 32, 10, token);
  ASSERT_THAT(back, IsOk());
  EXPECT_FALSE(back->applied);
  EXPECT_EQ(back->max, 32 + kReach);
}

TEST_F(SqliteReservationsTest, ARestartOnTheSameBootMovesNothing) {
  Open("boot-1");
  for (int i = 0; i < 5; ++i) Next();
  // The process dies: every commit is in the kernel's cache, which the
  // files as they are now stand for (the store is between batches).
  const std::filesystem::path copy = dir_.File("at-the-kill");
  std::filesystem::create_directory(copy);
  for (const char* suffix : {"", "-wal"}) {
    std::filesystem::copy_file(path_ + suffix,
                               copy / ("hilo.db" + std::string(suffix)));
  }
  // The files as the kill left them, over what the clean close made.
  auto put_back = [&] {
    for (const char* suffix : {"", "-wal"}) {
      std::filesystem::copy_file(
          copy / ("hilo.db" + std::string(suffix)), path_ + suffix,
          std::filesystem::copy_options::overwrite_existing);
    }
    std::filesystem::remove(path_ + "-shm");
  };
  store_.reset();
  put_back();
  Open("boot-1");
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(Next(), (Range{161, 192}));
  // On another boot the same files would have moved on.
  store_.reset();
  put_back();
  Open("boot-2");
  EXPECT_EQ(events_.size(), 1u);
  EXPECT_EQ(Next(), (Range{32 + kReach + 1, 32 + kReach + 32}));
  ExpectNoNumberTwice();
}

TEST_F(SqliteReservationsTest, ACleanCloseMovesNothingOnAnyBoot) {
  Open("boot-1");
  for (int i = 0; i < 5; ++i) Next();
  store_.reset();
  Open("boot-2");
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(Next(), (Range{161, 192}));
}

TEST_F(SqliteReservationsTest, TheReachShrinksWhenAReservationLastsLong) {
  Open("boot-1");
  Next();                                        // reserves to 32 + kReach
  for (int i = 0; i < kReach / 32; ++i) Next();  // up to it
  Next();  // within a second: reach 2 * kReach
  const int64_t doubled = handed_out_.back().high + 2 * kReach;
  while (handed_out_.back().high < doubled) Next();
  clock_.Advance(absl::Seconds(17));
  Next();  // the last reservation lasted 17 s: the reach halves
  const int64_t ceiling = handed_out_.back().high + kReach;
  CutPower();
  Open("boot-2");
  EXPECT_EQ(Next(), (Range{ceiling + 1, ceiling + 32}));
  ExpectNoNumberTwice();
}

TEST_F(SqliteReservationsTest, MadeAndDeletedRowsWaitForTheDisk) {
  Open("boot-1");
  int syncs = power_.syncs("-wal");
  const uint64_t token = NextToken();
  ASSERT_EQ(store_->Allocate("invoices", 32, 0, token).value(), (Range{1, 32}));
  EXPECT_EQ(power_.syncs("-wal"), syncs + 1);
  syncs = power_.syncs("-wal");
  // Back whole: Max 0 again, under the ceiling.
  ASSERT_TRUE(store_->Return("invoices", 32, 0, token)->applied);
  EXPECT_EQ(power_.syncs("-wal"), syncs);
  ASSERT_THAT(store_->Delete("invoices"), IsOk());
  EXPECT_EQ(power_.syncs("-wal"), syncs + 1);
  EXPECT_EQ(Next(), (Range{1, 32}));
  syncs = power_.syncs("-wal");
  ASSERT_THAT(store_->Retire("orders"), IsOk());
  EXPECT_EQ(power_.syncs("-wal"), syncs + 1);
  CutPower();
  Open("boot-2");
  absl::StatusOr<std::optional<CollectionState>> row = store_->Get("invoices");
  ASSERT_THAT(row, IsOk());
  EXPECT_FALSE(row->has_value());
  row = store_->Get("orders");
  ASSERT_THAT(row, IsOk());
  EXPECT_FALSE(row->has_value());
  // A new row of a retired name starts above what it handed out.
  EXPECT_GT(Next().low, 32);
}

TEST_F(SqliteReservationsTest,
       AFailedFlushFailsEveryLaterWriteAndMovesNextStart) {
  Open("boot-1");
  EXPECT_EQ(Next(), (Range{1, 32}));
  while (handed_out_.back().high < 32 + kReach) Next();
  power_.FailSyncs("-wal");
  // Past the ceiling: the flush fails, and nothing is handed out.
  absl::StatusOr<Range> past = store_->Allocate("orders", 32, 0, NextToken());
  EXPECT_THAT(past, testing_util::StatusIs(
                        absl::StatusCode::kUnavailable,
                        ::testing::HasSubstr("flushing the write-ahead log")));
  // Under no ceiling any more: the store trusts the file no further.
  EXPECT_THAT(store_->Allocate("other", 32, 0, NextToken()),
              testing_util::StatusIs(absl::StatusCode::kUnavailable));
  power_.HealSyncs();
  store_.reset();
  // On the same boot, the start moves all the same.
  Open("boot-1");
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_GT(Next().low, 32 + kReach + 32);
  ExpectNoNumberTwice();
}

// A boot the kernel would not tell: every start after an unclean stop
// moves, since none can show that the machine stayed up.
TEST(SqliteRunningMarkTest, AnUnknownBootAlwaysMoves) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  {
    SqliteRangeStoreOptions options;
    options.path = path;
    options.machine_boot = "boot-1";
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    ASSERT_THAT(store, IsOk());
    ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  int64_t skipped = 0;
  absl::StatusOr<internal::RunningMark> first = internal::MarkRunning(
      db, path, std::nullopt, absl::FromUnixSeconds(1), &skipped);
  ASSERT_THAT(first, IsOk());
  EXPECT_FALSE(first->left_by_another_boot);  // closed cleanly before
  absl::StatusOr<internal::RunningMark> second = internal::MarkRunning(
      db, path, std::nullopt, absl::FromUnixSeconds(2), &skipped);
  ASSERT_THAT(second, IsOk());
  EXPECT_TRUE(second->left_by_another_boot);
  EXPECT_EQ(second->moved, 1);
  EXPECT_EQ(skipped, kReach);
  sqlite3_close(db);
}

// The mount id of an open file as /proc/self/fdinfo tells it: the kernel's
// own count, read another way than statx.
std::optional<uint64_t> MountInFdinfo(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
  std::optional<uint64_t> mount;
  for (std::string line; std::getline(info, line);) {
    if (absl::StartsWith(line, "mnt_id:")) {
      uint64_t id = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(7)), &id)) {
        mount = id;
      }
    }
  }
  close(fd);
  return mount;
}

TEST(SqliteRunningMarkTest, TheFilesMountIsTheKernels) {
  TempDir dir;
  const std::string path = dir.File("some-file");
  const std::string sibling = dir.File("another-file");
  std::ofstream(path) << "x";
  std::ofstream(sibling) << "y";
  std::optional<internal::FileMount> mount = internal::ReadFileMount(path);
  ASSERT_TRUE(mount.has_value());
  std::optional<internal::FileMount> again = internal::ReadFileMount(sibling);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->id, mount->id);
  EXPECT_EQ(again->unique, mount->unique);
  // Where the kernel numbers mounts uniquely (Linux 6.8's
  // STATX_MNT_ID_UNIQUE, asked for here by its value), that is the id used.
  struct statx st;
  ASSERT_EQ(statx(AT_FDCWD, path.c_str(), 0, 0x4000, &st), 0);
  EXPECT_EQ(mount->unique, (st.stx_mask & 0x4000) != 0);
  if (mount->unique) {
    EXPECT_EQ(mount->id, st.stx_mnt_id);
  }
  // /proc is a mount of its own.
  std::optional<internal::FileMount> proc =
      internal::ReadFileMount("/proc/self/stat");
  ASSERT_TRUE(proc.has_value());
  EXPECT_NE(proc->id, mount->id);
  if (mount->unique) {
    EXPECT_EQ(internal::ReadRunningSession(path),
              absl::StrCat(*internal::ReadMachineBoot(), " mount ", mount->id));
  } else {
    // The reusable id, which fdinfo shows too.
    EXPECT_EQ(mount->id, MountInFdinfo(path));
    EXPECT_EQ(internal::ReadRunningSession(path),
              absl::StrCat(*internal::ReadMachineBoot(), " mount ", mount->id,
                           " reusable"));
  }
}

// Left as a running mark in the file at `path`, as a server that died
// would leave it.
void LeaveRunningMark(const std::string& path, const std::string& mark) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "INSERT INTO node(key, value) "
                               "VALUES('running', ?1)",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(stmt, 1, mark.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A volume detached and attached again while the machine ran is a new
// mount: whatever the kernel held for the old one and never wrote is gone,
// as after a reboot. The store's own mark (no machine_boot set) names the
// mount, so a start from another mount of the same boot moves.
TEST(SqliteRunningMarkTest, AStartOnAnotherMountOfTheSameBootMoves) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  auto open = [&] {
    SqliteRangeStoreOptions options;
    options.path = path;
    options.file_check_interval = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    EXPECT_THAT(store, IsOk());
    return store.ok() ? *std::move(store) : nullptr;
  };
  auto next = [](SqliteRangeStore* store) {
    absl::StatusOr<Range> range = store->Allocate("orders", 32, 0, NextToken());
    EXPECT_THAT(range, IsOk());
    return range.value_or(Range{});
  };
  {
    std::unique_ptr<SqliteRangeStore> store = open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(next(store.get()), (Range{1, 32}));
  }
  std::optional<std::string> session = internal::ReadRunningSession(path);
  std::optional<internal::FileMount> mount = internal::ReadFileMount(path);
  ASSERT_TRUE(session.has_value());
  ASSERT_TRUE(mount.has_value());
  // Left by a server of this boot on this mount: the kernel kept its
  // commits, nothing moves.
  LeaveRunningMark(path, *session);
  {
    std::unique_ptr<SqliteRangeStore> store = open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(next(store.get()), (Range{33, 64}));
  }
  // Left on another mount of the same boot: every row moves to its
  // ceiling, the one the first range reserved (32 + kReach).
  LeaveRunningMark(
      path, absl::StrCat(*internal::ReadMachineBoot(), " mount ", mount->id + 1,
                         mount->unique ? "" : " reusable"));
  std::unique_ptr<SqliteRangeStore> store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(next(store.get()), (Range{32 + kReach + 1, 32 + kReach + 32}));
}

TEST(SqliteRunningMarkTest, TheKernelsBootIsRead) {
  std::optional<std::string> boot = internal::ReadMachineBoot();
  ASSERT_TRUE(boot.has_value());
  EXPECT_EQ(boot->size(), 36u) << *boot;  // a UUID
  EXPECT_EQ(internal::ReadMachineBoot(), boot);
}

}  // namespace
}  // namespace hilo
