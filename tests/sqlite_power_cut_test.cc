#include "testing/sqlite_power_cut.h"

#include <sqlite3.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace hilo::testing_util {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A connection to `path` through the default VFS (the power cut's, while one
// exists). Closed by Close.
sqlite3* Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  EXPECT_EQ(rc, SQLITE_OK) << sqlite3_errmsg(db);
  return db;
}

void Close(sqlite3* db) { EXPECT_EQ(sqlite3_close(db), SQLITE_OK); }

// Runs `sql`; "" if it succeeded, else SQLite's error message.
std::string Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) == SQLITE_OK) {
    return "";
  }
  std::string message = error != nullptr ? error : "(no message)";
  sqlite3_free(error);
  return message;
}

// The values of the one-column query `sql`, as text.
std::vector<std::string> Column(sqlite3* db, const std::string& sql) {
  std::vector<std::string> values;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    values.emplace_back(
        reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_finalize(stmt);
  return values;
}

// The rows of table t in the database at `path`, opened afresh.
std::vector<std::string> Rows(const std::string& path) {
  sqlite3* db = Open(path);
  std::vector<std::string> rows = Column(db, "SELECT x FROM t ORDER BY x");
  Close(db);
  return rows;
}

// A WAL database at `path` whose table t holds row 1, committed under
// synchronous=FULL; the connection left at FULL.
sqlite3* OpenWithRowOne(const std::string& path) {
  sqlite3* db = Open(path);
  EXPECT_EQ(Exec(db, "PRAGMA journal_mode=WAL"), "");
  EXPECT_EQ(Exec(db, "PRAGMA synchronous=FULL"), "");
  EXPECT_EQ(Exec(db,
                 "BEGIN IMMEDIATE; CREATE TABLE t(x INTEGER); "
                 "INSERT INTO t VALUES (1); COMMIT"),
            "");
  return db;
}

TEST(SqlitePowerCutTest, NormalCommitAfterTheLastSyncIsLost) {
  TempDir dir;
  const std::string path = dir.File("power.db");
  SqlitePowerCut power;
  sqlite3* db = OpenWithRowOne(path);
  EXPECT_EQ(Exec(db, "PRAGMA synchronous=NORMAL"), "");
  EXPECT_EQ(Exec(db, "INSERT INTO t VALUES (2)"), "");

  const SqlitePowerCut::Disk disk = power.Durable();
  EXPECT_TRUE(disk.files.contains(path));
  EXPECT_TRUE(disk.files.contains(path + "-wal"));
  Close(db);
  // The clean close checkpointed both rows into the database.
  EXPECT_THAT(Rows(path), ElementsAre("1", "2"));

  SqlitePowerCut::Restore(disk);
  EXPECT_THAT(Rows(path), ElementsAre("1"));
}

TEST(SqlitePowerCutTest, FullCommitsSurviveAndEachSyncsTheLog) {
  TempDir dir;
  const std::string path = dir.File("power.db");
  SqlitePowerCut power;
  EXPECT_EQ(power.syncs(), 0);

  int before = power.syncs("-wal");
  sqlite3* db = OpenWithRowOne(path);
  EXPECT_GE(power.syncs("-wal") - before, 1);

  before = power.syncs("-wal");
  EXPECT_EQ(Exec(db, "INSERT INTO t VALUES (2)"), "");
  EXPECT_GE(power.syncs("-wal") - before, 1);

  EXPECT_EQ(Exec(db, "PRAGMA synchronous=NORMAL"), "");
  before = power.syncs("-wal");
  EXPECT_EQ(Exec(db, "INSERT INTO t VALUES (3)"), "");
  EXPECT_EQ(power.syncs("-wal") - before, 0);

  const SqlitePowerCut::Disk disk = power.Durable();
  Close(db);
  EXPECT_THAT(Rows(path), ElementsAre("1", "2", "3"));
  SqlitePowerCut::Restore(disk);
  EXPECT_THAT(Rows(path), ElementsAre("1", "2"));
}

// What the store relies on, or not: whether a COMMIT runs with the
// synchronous setting in force when COMMIT runs, set inside the transaction.
// SQLite refuses to change it inside a transaction ("Safety level may not be
// changed inside a transaction"): the COMMIT runs with the setting in force
// when the transaction began.
TEST(SqlitePowerCutTest, SynchronousCannotChangeInsideATransaction) {
  TempDir dir;
  const std::string path = dir.File("power.db");
  SqlitePowerCut power;
  sqlite3* db = OpenWithRowOne(path);

  // FULL, then NORMAL asked for inside: refused, and the COMMIT syncs.
  int before = power.syncs("-wal");
  EXPECT_EQ(Exec(db, "BEGIN IMMEDIATE; INSERT INTO t VALUES (2)"), "");
  EXPECT_THAT(Exec(db, "PRAGMA synchronous=NORMAL"),
              HasSubstr("may not be changed inside a transaction"));
  EXPECT_THAT(Column(db, "PRAGMA synchronous"), ElementsAre("2"));  // FULL
  EXPECT_EQ(Exec(db, "COMMIT"), "");
  EXPECT_EQ(power.syncs("-wal") - before, 1);

  // NORMAL, then FULL asked for inside: refused, and the COMMIT does not.
  EXPECT_EQ(Exec(db, "PRAGMA synchronous=NORMAL"), "");
  before = power.syncs("-wal");
  EXPECT_EQ(Exec(db, "BEGIN IMMEDIATE; INSERT INTO t VALUES (3)"), "");
  EXPECT_THAT(Exec(db, "PRAGMA synchronous=FULL"),
              HasSubstr("may not be changed inside a transaction"));
  EXPECT_THAT(Column(db, "PRAGMA synchronous"), ElementsAre("1"));  // NORMAL
  EXPECT_EQ(Exec(db, "COMMIT"), "");
  EXPECT_EQ(power.syncs("-wal") - before, 0);

  // So a power cut now loses row 3 and keeps row 2.
  const SqlitePowerCut::Disk disk = power.Durable();
  Close(db);
  SqlitePowerCut::Restore(disk);
  EXPECT_THAT(Rows(path), ElementsAre("1", "2"));
}

TEST(SqlitePowerCutTest, ADatabaseMadeBeforeIsDurableAsItWasUntilItsSync) {
  TempDir dir;
  const std::string path = dir.File("power.db");
  Close(OpenWithRowOne(path));  // before the power cut: checkpointed, closed
  const std::string made = ReadFile(path);
  ASSERT_FALSE(made.empty());

  SqlitePowerCut power;
  sqlite3* db = Open(path);
  EXPECT_EQ(Exec(db, "PRAGMA synchronous=NORMAL"), "");
  EXPECT_EQ(Exec(db, "INSERT INTO t VALUES (2)"), "");
  const SqlitePowerCut::Disk disk = power.Durable();
  // Compared whole, printed as sizes: the bytes would flood the log.
  EXPECT_TRUE(disk.files.at(path) == made)
      << disk.files.at(path).size() << " bytes, made " << made.size();
  Close(db);

  SqlitePowerCut::Restore(disk);
  EXPECT_THAT(Rows(path), ElementsAre("1"));
}

TEST(SqlitePowerCutTest, FilesNeverSyncedComeBackEmpty) {
  TempDir dir;
  const std::string path = dir.File("power.db");
  SqlitePowerCut power;
  sqlite3* db = Open(path);
  EXPECT_EQ(Exec(db, "PRAGMA synchronous=OFF; PRAGMA journal_mode=WAL"), "");
  EXPECT_EQ(Exec(db, "CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1)"),
            "");
  const SqlitePowerCut::Disk disk = power.Durable();
  EXPECT_EQ(power.syncs(), 0);
  EXPECT_EQ(disk.files.at(path).size(), 0u);
  EXPECT_EQ(disk.files.at(path + "-wal").size(), 0u);
  Close(db);

  SqlitePowerCut::Restore(disk);
  EXPECT_EQ(ReadFile(path).size(), 0u);
  db = Open(path);
  EXPECT_THAT(Column(db, "SELECT name FROM sqlite_schema"), IsEmpty());
  Close(db);
}

TEST(SqlitePowerCutTest, TheOldDefaultVfsIsBackAfterDestruction) {
  sqlite3_vfs* const before = sqlite3_vfs_find(nullptr);
  ASSERT_NE(before, nullptr);
  {
    SqlitePowerCut power;
    sqlite3_vfs* const during = sqlite3_vfs_find(nullptr);
    EXPECT_NE(during, before);
    EXPECT_GT(during->szOsFile, before->szOsFile);
    EXPECT_EQ(during->mxPathname, before->mxPathname);
  }
  EXPECT_EQ(sqlite3_vfs_find(nullptr), before);
}

}  // namespace
}  // namespace hilo::testing_util
