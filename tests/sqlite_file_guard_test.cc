// SqliteRangeStore and the file it opened (SqliteFileGuard): a file deleted
// or replaced under the store, a new database only when allowed, and one
// writable store per file.
#include "service/store/sqlite/sqlite_file_guard.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::internal::kFileLostMessage;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// What the store told its on_file_lost, in order (thread-safe).
class LossLog {
 public:
  std::function<void(const absl::Status&)> Callback() {
    return [this](const absl::Status& status) {
      base::MutexLock lock(&mu_);
      seen_.push_back(status);
      notified_.Notify();
    };
  }
  std::vector<absl::Status> seen() {
    base::MutexLock lock(&mu_);
    return seen_;
  }
  testing_util::Notification& notified() { return notified_; }

 private:
  base::Mutex mu_;
  std::vector<absl::Status> seen_ ABSL_GUARDED_BY(mu_);
  testing_util::Notification notified_;
};

// A store on `path` that checks its file only when told (no thread).
std::unique_ptr<SqliteRangeStore> OpenWatched(const std::string& path,
                                              LossLog& log) {
  SqliteRangeStoreOptions options;
  options.path = path;
  options.sync = SyncMode::kNormal;
  options.file_check_interval = absl::ZeroDuration();
  options.on_file_lost = log.Callback();
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? *std::move(store) : nullptr;
}

// A second hilo database at `path`, made and closed.
void MakeOtherDatabase(const std::string& path) {
  SqliteRangeStoreOptions options;
  options.path = path;
  options.file_check_interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> other =
      SqliteRangeStore::Open(std::move(options));
  ASSERT_THAT(other, IsOk());
}

TEST(SqliteFileGuardTest, WriteAfterTheFileIsDeletedIsRefusedBeforeCommit) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  LossLog log;
  std::unique_ptr<SqliteRangeStore> store = OpenWatched(path, log);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Range> first = store->Allocate("orders", 32, 0, NextToken());
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->high, 32);

  ASSERT_EQ(unlink(path.c_str()), 0);
  // No check ran in between: the write itself finds the file gone, and
  // hands nothing out of the deleted inode.
  EXPECT_THAT(store->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_THAT(log.seen(),
              ElementsAre(StatusIs(absl::StatusCode::kUnavailable,
                                   absl::StrCat("database ", path,
                                                " was deleted while this "
                                                "server had it open"))));
  // Everything after: refused at once, reads too; told only once.
  EXPECT_THAT(store->Allocate("invoices", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_THAT(store->Get("orders"),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_THAT(store->CheckFile(),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_EQ(log.seen().size(), 1u);
}

TEST(SqliteFileGuardTest, CheckFindsTheFileReplacedWithoutAnyWrite) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  LossLog log;
  std::unique_ptr<SqliteRangeStore> store = OpenWatched(path, log);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Allocate("orders", 32, 0, NextToken()), IsOk());
  EXPECT_THAT(store->CheckFile(), IsOk());
  EXPECT_THAT(log.seen(), IsEmpty());

  // An older copy moved over it, as a careless restore does.
  const std::string copy = dir.File("copy.db");
  MakeOtherDatabase(copy);
  struct stat was;
  ASSERT_EQ(stat(path.c_str(), &was), 0);
  struct stat now;
  ASSERT_EQ(stat(copy.c_str(), &now), 0);
  ASSERT_EQ(rename(copy.c_str(), path.c_str()), 0);

  EXPECT_THAT(store->CheckFile(),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_THAT(
      log.seen(),
      ElementsAre(StatusIs(absl::StatusCode::kUnavailable,
                           absl::StrCat("database ", path,
                                        " was replaced by another file (inode ",
                                        now.st_ino, ", was ", was.st_ino,
                                        ") while this server had it open"))));
  EXPECT_THAT(store->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
}

TEST(SqliteFileGuardTest, DeletedWriteAheadLogIsALostFileToo) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  LossLog log;
  std::unique_ptr<SqliteRangeStore> store = OpenWatched(path, log);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Allocate("orders", 32, 0, NextToken()), IsOk());
  ASSERT_EQ(unlink((path + "-wal").c_str()), 0);
  EXPECT_THAT(store->CheckFile(),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
  EXPECT_THAT(
      log.seen(),
      ElementsAre(StatusIs(
          absl::StatusCode::kUnavailable,
          absl::StrCat("database ", path, " lost its write-ahead log: ", path,
                       "-wal was deleted while this server had it "
                       "open, and with it the latest commits"))));
}

// The store's own thread finds it with no call at all (bounded wait for
// the thread, not a timed assertion).
TEST(SqliteFileGuardTest, TheStoresThreadNoticesAnIdleStoresFileGone) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  LossLog log;
  SqliteRangeStoreOptions options;
  options.path = path;
  options.file_check_interval = absl::Milliseconds(1);
  options.on_file_lost = log.Callback();
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  EXPECT_FALSE(log.notified().HasBeenNotified());
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_TRUE(log.notified().WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_THAT(log.seen(),
              ElementsAre(StatusIs(absl::StatusCode::kUnavailable,
                                   ::testing::HasSubstr("was deleted"))));
  EXPECT_THAT((*store)->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable, kFileLostMessage));
}

// Closing the store's last connection deletes the -wal file: a clean close
// is not a lost log, however its watch thread is timed against it.
TEST(SqliteFileGuardTest, ClosingTheStoreIsNotALostFile) {
  TempDir dir;
  LossLog log;
  for (int round = 0; round < 30; ++round) {
    SqliteRangeStoreOptions options;
    options.path = dir.File("h.db");
    options.file_check_interval = absl::Microseconds(100);
    options.on_file_lost = log.Callback();
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    ASSERT_THAT(store, IsOk());
    ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  }
  EXPECT_THAT(log.seen(), IsEmpty());
}

TEST(SqliteFileGuardTest, OneWritableStorePerFileAndReadOnlyNeedsNoLock) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  LossLog log;
  std::unique_ptr<SqliteRangeStore> store = OpenWatched(path, log);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Allocate("orders", 32, 0, NextToken()), IsOk());

  SqliteRangeStoreOptions options;
  options.path = path;
  options.file_check_interval = absl::ZeroDuration();
  EXPECT_THAT(
      SqliteRangeStore::Open(options),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               absl::StrCat("database ", path,
                            " is already served by another hilo_server (pid ",
                            getpid(),
                            "), which holds its lock; one file serves one "
                            "server: stop the other, or give this one its "
                            "own --db")));

  SqliteRangeStoreOptions read_only = options;
  read_only.read_only = true;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> reader =
      SqliteRangeStore::Open(read_only);
  ASSERT_THAT(reader, IsOk());
  absl::StatusOr<std::optional<CollectionState>> row = (*reader)->Get("orders");
  ASSERT_THAT(row, IsOk());
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->max, 32);

  store.reset();  // releases the lock
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> again =
      SqliteRangeStore::Open(options);
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE((*again)->created());
}

TEST(SqliteFileGuardTest, NoNewDatabaseUnlessAllowedAndNothingMade) {
  TempDir dir;
  const std::string path = dir.File("sub/h.db");
  SqliteRangeStoreOptions options;
  options.path = path;
  options.file_check_interval = absl::ZeroDuration();
  options.create_if_missing = false;
  EXPECT_THAT(SqliteRangeStore::Open(options),
              StatusIs(absl::StatusCode::kNotFound,
                       absl::StrCat("database ", path, " does not exist")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("sub")));

  // An empty file (a truncated copy, `: > hilo.db`) is no database either.
  const std::string empty = dir.File("empty.db");
  testing_util::WriteFile(empty, "");
  options.path = empty;
  EXPECT_THAT(SqliteRangeStore::Open(options),
              StatusIs(absl::StatusCode::kNotFound,
                       absl::StrCat("database ", empty,
                                    " is an empty file, not a hilo database")));
  EXPECT_EQ(std::filesystem::file_size(empty), 0u);

  options.path = path;
  options.create_if_missing = true;
  {
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> made =
        SqliteRangeStore::Open(options);
    ASSERT_THAT(made, IsOk());
    EXPECT_TRUE((*made)->created());
    EXPECT_EQ((*made)->absolute_path(), path);
    EXPECT_EQ((*made)->collection_count(), 0);
    ASSERT_THAT((*made)->Allocate("orders", 32, 0, NextToken()), IsOk());
  }
  for (bool create : {false, true}) {
    options.create_if_missing = create;
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> opened =
        SqliteRangeStore::Open(options);
    ASSERT_THAT(opened, IsOk());
    EXPECT_FALSE((*opened)->created());
    EXPECT_EQ((*opened)->collection_count(), 1);
  }
}

// `rm hilo.db` without its -wal, then a new database at the same path:
// SQLite would replay the old log into it.
TEST(SqliteFileGuardTest, NewDatabaseBesideALeftoverLogIsRefused) {
  TempDir dir;
  const std::string path = dir.File("h.db");
  testing_util::WriteFile(path + "-wal", "not empty");
  SqliteRangeStoreOptions options;
  options.path = path;
  options.file_check_interval = absl::ZeroDuration();
  EXPECT_THAT(
      SqliteRangeStore::Open(options),
      StatusIs(
          absl::StatusCode::kFailedPrecondition,
          absl::StrCat("database ", path,
                       " does not exist but its write-ahead log ", path,
                       "-wal does: the database was deleted or moved "
                       "without it. Put the database back, or remove ",
                       path, "-wal (and ", path, "-shm) to start a new one")));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SqliteFileGuardTest, RelativePathsAreNamedAbsolute) {
  TempDir dir;
  const std::filesystem::path was = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  SqliteRangeStoreOptions options;
  options.path = "./data/h.db";
  options.file_check_interval = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  std::filesystem::current_path(was);
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ((*store)->absolute_path(), dir.File("data/h.db"));
}

}  // namespace
}  // namespace hilo
