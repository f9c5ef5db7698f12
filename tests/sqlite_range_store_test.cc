#include "service/store/sqlite/sqlite_range_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kMax;
using ::hilo::testing_util::kNeverIssued;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The store's before-commit hook for tests of batching: holds the next
// commit until released, so operations started meanwhile queue up for the
// batch after it, and can fail a commit as a full disk would.
class CommitGate {
 public:
  std::function<absl::Status()> Hook() {
    return [this]() -> absl::Status {
      if (hold_.exchange(false)) {
        held_.Notify();
        release_.WaitForNotification();
        return hold_status_;
      }
      if (fail_next_.exchange(false)) return fail_status_;
      return absl::OkStatus();
    };
  }
  // The next commit waits for Release, then answers `status`. Once.
  void HoldNext(absl::Status status) {
    hold_status_ = std::move(status);
    hold_ = true;
  }
  void WaitUntilHeld() { held_.WaitForNotification(); }
  // The commit after the held one answers `status`.
  void FailNext(absl::Status status) {
    fail_status_ = std::move(status);
    fail_next_ = true;
  }
  void Release() { release_.Notify(); }

 private:
  std::atomic<bool> hold_{false};
  std::atomic<bool> fail_next_{false};
  absl::Status hold_status_;
  absl::Status fail_status_;
  testing_util::Notification held_, release_;
};

// The SQLite store's own behaviour: batching, failed commits and
// releases, files, schema versions. What every store does is in
// range_store_contract_test.cc.
class SqliteRangeStoreTest : public ::testing::Test,
                             public testing_util::RangeStoreFixture {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen(std::function<absl::Status()> before_commit = nullptr,
              int max_batch = SqliteRangeStoreOptions().max_batch) {
    SqliteRangeStoreOptions options;
    options.sync = sync_;
    options.max_batch = max_batch;
    options.before_commit_for_testing = std::move(before_commit);
    Open(std::move(options));
  }

  void Open(SqliteRangeStoreOptions options) {
    store_.reset();
    sqlite_ = nullptr;
    options.path = dir_.File("hilo.db");
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    ASSERT_THAT(store, IsOk());
    sqlite_ = store->get();
    store_ = *std::move(store);
  }

  // Starts `fn` on a thread whose operation is the next batch's first, and
  // returns once that batch is held at its commit (by `gate`, armed here to
  // hold once and then answer `status`).
  void HoldFirstCommit(CommitGate& gate, std::vector<std::thread>& threads,
                       std::function<void()> fn,
                       absl::Status status = absl::OkStatus()) {
    gate.HoldNext(std::move(status));
    threads.emplace_back(std::move(fn));
    gate.WaitUntilHeld();
  }

  // Starts `fn` on a thread and returns once its operation waits for the
  // next batch, behind those queued before it.
  void Queue(std::vector<std::thread>& threads, std::function<void()> fn) {
    const size_t queued = ++queued_;
    threads.emplace_back(std::move(fn));
    sqlite_->WaitForPendingForTesting(queued);
  }

  TempDir dir_;
  SqliteRangeStore* sqlite_ = nullptr;  // store_, as what it is
  size_t queued_ = 0;
  SyncMode sync_ = SqliteRangeStoreOptions().sync;  // what Reopen opens with
};

// Batching and failed commits, in both sync modes: what each operation is
// told must not depend on whether its batch's COMMIT waits for the disk.
class SqliteRangeStoreBatchTest
    : public SqliteRangeStoreTest,
      public ::testing::WithParamInterface<SyncMode> {
 protected:
  void SetUp() override {
    sync_ = GetParam();
    SqliteRangeStoreTest::SetUp();
  }
};

INSTANTIATE_TEST_SUITE_P(SyncModes, SqliteRangeStoreBatchTest,
                         ::testing::Values(SyncMode::kFull, SyncMode::kNormal),
                         [](const ::testing::TestParamInfo<SyncMode>& info) {
                           return std::string(SyncModeName(info.param));
                         });

TEST_P(SqliteRangeStoreBatchTest, FailingOperationDoesNotFailOthersInItsBatch) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_THAT(store_->PutForTesting(
                  "full", CollectionState{.max = kMax - 5,
                                          .return_floor = 1,
                                          .updated_at = clock_.Now()}),
              IsOk());
  const int64_t commits_before = sqlite_->commits();

  absl::StatusOr<Range> first, ok_before, failing, ok_after;
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("a", 32, 0, NextToken()); });
  Queue(threads,
        [&] { ok_before = store_->Allocate("b", 32, 0, NextToken()); });
  Queue(threads,
        [&] { failing = store_->Allocate("full", 32, 0, NextToken()); });
  Queue(threads, [&] { ok_after = store_->Allocate("c", 32, 0, NextToken()); });
  gate.Release();
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(sqlite_->commits() - commits_before, 2);
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(ok_before, IsOk());
  ASSERT_THAT(ok_after, IsOk());
  EXPECT_THAT(failing, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(*ok_before, (Range{1, 32}));
  EXPECT_EQ(*ok_after, (Range{1, 32}));
  Reopen();
  EXPECT_EQ(StoredMax("b"), 32);
  EXPECT_EQ(StoredMax("c"), 32);
  EXPECT_EQ(StoredMax("full"), kMax - 5);
}

TEST_P(SqliteRangeStoreBatchTest,
       QueuedOpsCommitInArrivalOrderAtMostMaxBatchAtATime) {
  CommitGate gate;
  Reopen(gate.Hook(), /*max_batch=*/2);
  const int64_t commits_before = sqlite_->commits();
  absl::StatusOr<Range> first;
  constexpr int kQueued = 5;
  std::vector<absl::StatusOr<Range>> queued(kQueued);
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("q", 1, 0, NextToken()); });
  for (int i = 0; i < kQueued; ++i) {
    Queue(threads,
          [&, i] { queued[i] = store_->Allocate("q", 1, 0, NextToken()); });
  }
  gate.Release();
  for (std::thread& t : threads) t.join();

  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(*first, (Range{1, 1}));
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_THAT(queued[i], IsOk()) << i << ": " << queued[i].status();
    EXPECT_EQ(*queued[i], (Range{i + 2, i + 2})) << i;
  }
  // The held batch, then 2 + 2 + 1.
  EXPECT_EQ(sqlite_->commits() - commits_before, 4);
}

TEST_P(SqliteRangeStoreBatchTest, FailedCommitFailsOnlyItsOwnBatch) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<Range> first, write;
  std::vector<std::thread> threads;
  HoldFirstCommit(
      gate, threads, [&] { first = store_->Allocate("a", 32, 0, NextToken()); },
      absl::ResourceExhaustedError("disk is full (injected)"));
  Queue(threads,
        [&] { write = store_->Allocate("orders", 32, 0, NextToken()); });
  gate.Release();  // the first batch's commit fails; the second is fine
  for (std::thread& t : threads) t.join();

  EXPECT_THAT(first, StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_THAT(write, IsOk());
  EXPECT_EQ(*write, (Range{33, 64}));
  EXPECT_EQ(StoredMax("orders"), 64);
  absl::StatusOr<std::vector<NamedCollectionState>> list = store_->List("", 10);
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->size(), 1u);  // "a" never made it
}

// The rows held in memory follow the file: after a failed COMMIT the next
// batch judges on what is on disk, so the range the failed batch would have
// handed out is handed out again (it never reached anyone) and nothing is
// skipped or reissued.
TEST_P(SqliteRangeStoreBatchTest, FailedCommitPutsHeldRowsBackToTheFile) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<Range> failed;
  std::vector<std::thread> threads;
  HoldFirstCommit(
      gate, threads,
      [&] { failed = store_->Allocate("orders", 32, 0, NextToken()); },
      absl::ResourceExhaustedError("disk is full (injected)"));
  gate.Release();
  for (std::thread& t : threads) t.join();

  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  Reopen();
  EXPECT_EQ(StoredMax("orders"), 64);
}

// Many operations on one collection in one batch: judged one after another
// in memory, the row written once.
TEST_P(SqliteRangeStoreBatchTest, RowChangedManyTimesInABatchIsWrittenOnce) {
  CommitGate gate;
  Reopen(gate.Hook());
  const int64_t written_before = sqlite_->rows_written();
  const int64_t commits_before = sqlite_->commits();
  absl::StatusOr<Range> first;
  constexpr int kQueued = 5;
  std::vector<absl::StatusOr<Range>> queued(kQueued);
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("q", 1, 0, NextToken()); });
  for (int i = 0; i < kQueued; ++i) {
    Queue(threads,
          [&, i] { queued[i] = store_->Allocate("q", 1, 0, NextToken()); });
  }
  gate.Release();
  for (std::thread& t : threads) t.join();

  // The held batch, then the queued five in one: a row written per batch.
  EXPECT_EQ(sqlite_->commits() - commits_before, 2);
  EXPECT_EQ(sqlite_->rows_written() - written_before, 2);
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_THAT(queued[i], IsOk());
    EXPECT_EQ(*queued[i], (Range{i + 2, i + 2}));
  }
  Reopen();
  EXPECT_EQ(StoredMax("q"), kQueued + 1);
}

// Reads run on a connection of their own: while a write batch waits at its
// commit, they answer at once, with what is stored (not the batch's
// uncommitted writes), and once the commit fails they still see only that.
TEST_P(SqliteRangeStoreBatchTest, ReadsAnswerWhileAWriteBatchIsHeld) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<Range> held;
  std::vector<std::thread> threads;
  HoldFirstCommit(
      gate, threads,
      [&] { held = store_->Allocate("orders", 32, 0, NextToken()); },
      absl::ResourceExhaustedError("disk is full (injected)"));
  // Bounded, so that reads stuck behind the held commit fail the test
  // rather than hang it.
  auto reads = std::async(std::launch::async, [&] {
    return std::make_pair(store_->Get("orders"), store_->List("", 10));
  });
  const bool answered_while_held =
      reads.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  gate.Release();
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(answered_while_held)
      << "reads waited for the write batch's commit";
  auto [row, list] = reads.get();
  ASSERT_TRUE(row.ok() && row->has_value()) << row.status();
  EXPECT_EQ((*row)->max, 32);
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].state.max, 32);
  EXPECT_THAT(held, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(StoredMax("orders"), 32);
}

// If a changed row cannot be written, nothing of its batch may commit, no
// operation of it may report success, and the rows the store holds in
// memory go back to what the file holds: the next batch continues from
// there.
TEST_P(SqliteRangeStoreBatchTest, FailedRowWriteFailsTheWholeBatch) {
  CommitGate gate;
  std::atomic<int> writes{0};
  SqliteRangeStoreOptions options;
  options.before_commit_for_testing = gate.Hook();
  options.before_write_for_testing = [&]() -> absl::Status {
    // The second row of the second batch cannot be written.
    if (writes.fetch_add(1) == 2) {
      return absl::InternalError("write failed (injected)");
    }
    return absl::OkStatus();
  };
  Open(std::move(options));

  absl::StatusOr<Range> first, a, b, c;
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("x", 32, 0, NextToken()); });
  Queue(threads, [&] { a = store_->Allocate("x", 32, 0, NextToken()); });
  Queue(threads, [&] { b = store_->Allocate("b", 32, 0, NextToken()); });
  Queue(threads, [&] { c = store_->Allocate("c", 32, 0, NextToken()); });
  gate.Release();
  for (std::thread& t : threads) t.join();

  ASSERT_THAT(first, IsOk());
  for (const absl::StatusOr<Range>* r : {&a, &b, &c}) {
    EXPECT_THAT(r->status(), StatusIs(absl::StatusCode::kInternal,
                                      HasSubstr("write failed")));
  }
  // Judged on what the file holds, not on the failed batch's rows.
  EXPECT_EQ(MustAllocate("x", 32), (Range{33, 64}));
  EXPECT_EQ(MustAllocate("b", 32), (Range{1, 32}));
  Reopen();
  EXPECT_EQ(StoredMax("x"), 64);
  EXPECT_EQ(StoredMax("b"), 32);
  EXPECT_FALSE(store_->Get("c")->has_value());
}

// Runs `sql` on the SQLite file at `path`, creating it if need be; fails
// the test, saying why, if it cannot.
void ExecOnFile(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  char* error = nullptr;
  const int opened = sqlite3_open(path.c_str(), &db);
  EXPECT_EQ(opened, SQLITE_OK) << sqlite3_errmsg(db);
  if (opened == SQLITE_OK) {
    EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK)
        << error;
  }
  sqlite3_free(error);
  sqlite3_close(db);
}

// PRAGMA user_version of the SQLite file at `path`, the schema version the
// store keeps there; -1, failing the test, if it cannot be read.
int UserVersion(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  int version = -1;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr) ==
          SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    version = sqlite3_column_int(stmt, 0);
  } else {
    ADD_FAILURE() << "cannot read PRAGMA user_version of " << path << ": "
                  << sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return version;
}

TEST(SqliteRangeStoreOpenTest, FileThatIsNotSqliteIsFailedPrecondition) {
  TempDir dir;
  std::ofstream(dir.File("bad.db"))
      << "this is not a database, just text " << std::string(4096, 'x');
  SqliteRangeStoreOptions options;
  options.path = dir.File("bad.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(
      store, StatusIs(absl::StatusCode::kFailedPrecondition,
                      AllOf(HasSubstr("bad.db"), HasSubstr("not a database"))));
}

TEST(SqliteRangeStoreOpenTest, OtherApplicationsDatabaseIsFailedPrecondition) {
  TempDir dir;
  ExecOnFile(dir.File("other.db"), "CREATE TABLE t(x)");
  SqliteRangeStoreOptions options;
  options.path = dir.File("other.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("another application")));
}

// Writes a database as schema version 1 (column last_low) left it.
void WriteSchemaOneDatabase(const std::string& path) {
  ExecOnFile(path, R"sql(
    CREATE TABLE collections (
      name TEXT NOT NULL PRIMARY KEY, max INTEGER NOT NULL,
      last_low INTEGER NOT NULL, updated_at_us INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO collections VALUES
      ('issued', 64, 33, 1), ('returned', 10, 11, 2),
      ('wrapped', 9223372036854775807, -9223372036854775808, 3),
      ('floor_at_top', 9223372036854775807, 9223372036854775807, 4);
    PRAGMA application_id = 1214860399;
    PRAGMA user_version = 1;
  )sql");
}

TEST(SqliteRangeStoreOpenTest, SchemaOneIsMigratedToReturnFloors) {
  TempDir dir;
  WriteSchemaOneDatabase(dir.File("v1.db"));
  SqliteRangeStoreOptions options;
  options.path = dir.File("v1.db");
  for (int open = 0; open < 2; ++open) {  // the second open finds version 3
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(options);
    ASSERT_THAT(store, IsOk());
    absl::StatusOr<std::vector<NamedCollectionState>> rows =
        (*store)->List("", 10);
    ASSERT_THAT(rows, IsOk());
    ASSERT_EQ(rows->size(), 4);
    std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> got;
    for (const NamedCollectionState& row : *rows) {
      got.push_back({row.name, {row.state.max, row.state.return_floor}});
    }
    EXPECT_THAT(got, ::testing::ElementsAre(
                         std::pair{"floor_at_top", std::pair{kMax, kMax}},
                         std::pair{"issued", std::pair{64, 32}},
                         std::pair{"returned", std::pair{10, 10}},
                         std::pair{"wrapped", std::pair{kMax, kMax}}));
  }
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  EXPECT_TRUE((*store)->Return("issued", 64, 32, /*token=*/0)->applied);
  EXPECT_FALSE(
      (*store)->Return("wrapped", kMax, kMax - 1, /*token=*/0)->applied);
  store->reset();
  EXPECT_EQ(UserVersion(options.path), 7);
}

TEST(SqliteRangeStoreOpenTest, SchemaTwoGainsTokensThatNoReturnCanMatch) {
  TempDir dir;
  const std::string path = dir.File("v2.db");
  ExecOnFile(path, R"sql(
    CREATE TABLE collections (
      name TEXT NOT NULL PRIMARY KEY, max INTEGER NOT NULL,
      return_floor INTEGER NOT NULL, updated_at_us INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO collections VALUES ('orders', 64, 32, 1);
    PRAGMA application_id = 1214860399;
    PRAGMA user_version = 2;
  )sql");
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  absl::StatusOr<std::optional<CollectionState>> row = (*store)->Get("orders");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->max, 64);
  EXPECT_EQ((*row)->return_floor, 32);
  EXPECT_EQ((*row)->range_token, 0u);
  EXPECT_EQ((*row)->previous_token, 0u);
  // The range out when the server was upgraded has no token to show.
  EXPECT_FALSE((*store)->Return("orders", 64, 40, kNeverIssued)->applied);
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken())->low, 65);
}

TEST(SqliteRangeStoreOpenTest, FailedMigrationNamesItselfAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("bad-v1.db");
  // Says version 1 but lacks its last_low column.
  ExecOnFile(path,
             "CREATE TABLE collections(name TEXT PRIMARY KEY, max INTEGER);"
             "PRAGMA application_id = 1214860399;"
             "PRAGMA user_version = 1;");
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(store,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("migrating schema version 1 to 7 "
                                       "(nothing changed)"),
                             HasSubstr("bad-v1.db"), HasSubstr("last_low"))));
  EXPECT_EQ(UserVersion(path), 1);
}

TEST(SqliteRangeStoreOpenTest, NewerSchemaIsFailedPrecondition) {
  TempDir dir;
  ExecOnFile(dir.File("new.db"),
             "PRAGMA application_id = 1214860399;"
             "PRAGMA user_version = 99;");
  SqliteRangeStoreOptions options;
  options.path = dir.File("new.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("schema version 99")));
}

TEST(SqliteRangeStoreOpenTest, CreatesMissingDirectories) {
  TempDir dir;
  SqliteRangeStoreOptions options;
  options.path = dir.File("a/b/c/hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ((*store)->Allocate("x", 32, 0, NextToken())->high, 32);
}

// A power loss right after the first start must not lose the database's
// directory entry, or the node would start again at 1.
TEST(SqliteRangeStoreOpenTest, FlushesEveryDirectoryItCreatesAndTheNewFile) {
  TempDir dir;
  SqliteRangeStoreOptions options;
  options.path = dir.File("a/b/hilo.db");
  std::vector<std::string> synced;
  options.directory_synced_for_testing = [&](const std::string& d) {
    synced.push_back(d);
  };
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  // a's entry lives in the temp dir, b's in a, the file's in b.
  EXPECT_THAT(synced, ::testing::ElementsAre(dir.path(), dir.File("a"),
                                             dir.File("a/b")));
  store->reset();
  synced.clear();
  ASSERT_THAT(SqliteRangeStore::Open(options), IsOk());
  EXPECT_THAT(synced, ::testing::IsEmpty());  // nothing new to flush
}

TEST(SqliteRangeStoreOpenTest, PathUnderAFileIsUnavailable) {
  TempDir dir;
  std::ofstream(dir.File("plain")) << "x";
  SqliteRangeStoreOptions options;
  options.path = dir.File("plain/hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(store,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("plain")));
}

// Who commits: the queue's own thread, in either sync mode, never the
// caller's (GroupCommit runs every batch on a thread of its own).
TEST_F(SqliteRangeStoreTest, TheQueuesOwnThreadCommits) {
  for (SyncMode sync : {SyncMode::kFull, SyncMode::kNormal}) {
    std::atomic<std::thread::id> committer;
    SqliteRangeStoreOptions options;
    options.sync = sync;
    options.on_commit = [&committer](absl::Duration, int, int64_t) {
      committer = std::this_thread::get_id();
    };
    Open(std::move(options));
    EXPECT_EQ(MustAllocate(SyncModeName(sync), 32).low, 1);
    EXPECT_NE(committer.load(), std::thread::id());
    EXPECT_NE(committer.load(), std::this_thread::get_id())
        << SyncModeName(sync);
  }
}

TEST(SyncModeTest, ParsesFullAndNormalOnly) {
  EXPECT_EQ(*ParseSyncMode("full"), SyncMode::kFull);
  EXPECT_EQ(*ParseSyncMode("NORMAL"), SyncMode::kNormal);
  EXPECT_THAT(ParseSyncMode("off"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hilo
