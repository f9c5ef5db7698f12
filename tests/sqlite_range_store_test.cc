#include "service/sqlite_range_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing::TempDir;
using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

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
  testing::Notification held_, release_;
};

class SqliteRangeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen(std::function<absl::Status()> before_commit = nullptr,
              int max_batch = SqliteRangeStoreOptions().max_batch) {
    store_.reset();
    SqliteRangeStoreOptions options;
    options.path = dir_.File("hilo.db");
    options.clock = &clock_;
    options.max_batch = max_batch;
    options.before_commit_for_testing = std::move(before_commit);
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(options));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  Range MustAllocate(absl::string_view collection, int64_t size,
                     int64_t floor = 0) {
    absl::StatusOr<Range> range = store_->Allocate(collection, size, floor);
    EXPECT_TRUE(range.ok()) << range.status();
    return range.value_or(Range{});
  }

  int64_t StoredMax(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> state =
        store_->Get(collection);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() && state->has_value() ? (*state)->max : -1;
  }

  // Starts `fn` on a thread whose operation leads the next batch, and
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
    store_->WaitForPendingForTesting(queued);
  }

  TempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  size_t queued_ = 0;
  std::unique_ptr<SqliteRangeStore> store_;
};

TEST_F(SqliteRangeStoreTest, NewCollectionStartsAtOneAndContinues) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  EXPECT_EQ(MustAllocate("orders", 64), (Range{65, 128}));
  EXPECT_EQ(MustAllocate("users", 32), (Range{1, 32}));
}

TEST_F(SqliteRangeStoreTest, RecordsMaxReturnFloorAndTimeOfChange) {
  MustAllocate("orders", 32);
  clock_.Advance(absl::Seconds(7));
  MustAllocate("orders", 32);
  absl::StatusOr<std::optional<CollectionState>> state = store_->Get("orders");
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->max, 64);
  EXPECT_EQ((*state)->return_floor, 32);
  EXPECT_EQ((*state)->updated_at, clock_.Now());
}

TEST_F(SqliteRangeStoreTest, UnknownCollectionHasNoRow) {
  absl::StatusOr<std::optional<CollectionState>> state = store_->Get("none");
  ASSERT_TRUE(state.ok());
  EXPECT_FALSE(state->has_value());
}

TEST_F(SqliteRangeStoreTest, FloorRaisesTheRangeButNeverLowersIt) {
  EXPECT_EQ(MustAllocate("orders", 32, 100), (Range{101, 132}));
  EXPECT_EQ(MustAllocate("orders", 32, 50), (Range{133, 164}));
}

TEST_F(SqliteRangeStoreTest, NamesAreComparedByteForByte) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("Orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("orders ", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("\xC3\xA9", 32), (Range{1, 32}));   // precomposed
  EXPECT_EQ(MustAllocate("e\xCC\x81", 32), (Range{1, 32}));  // decomposed
}

TEST_F(SqliteRangeStoreTest, ReturnOfUnusedTailLetsNextRangeContinue) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<ReturnOutcome> outcome = store_->Return("orders", 32, 1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 1);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{2, 33}));
}

TEST_F(SqliteRangeStoreTest, ReturnOfWholeRangeIsApplied) {
  MustAllocate("orders", 32);
  absl::StatusOr<ReturnOutcome> outcome = store_->Return("orders", 32, 0);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
}

TEST_F(SqliteRangeStoreTest, StaleReturnIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // another client took 33-64
  absl::StatusOr<ReturnOutcome> outcome = store_->Return("orders", 32, 5);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 64);
  EXPECT_EQ(StoredMax("orders"), 64);
}

TEST_F(SqliteRangeStoreTest, ReturnBelowLastIssuedLowIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  absl::StatusOr<ReturnOutcome> below = store_->Return("orders", 64, 10);
  ASSERT_TRUE(below.ok());
  EXPECT_FALSE(below->applied);
  EXPECT_EQ(below->max, 64);
  absl::StatusOr<ReturnOutcome> edge = store_->Return("orders", 64, 32);
  ASSERT_TRUE(edge.ok());
  EXPECT_TRUE(edge->applied);
  EXPECT_EQ(edge->max, 32);
}

TEST_F(SqliteRangeStoreTest, SecondReturnCannotMoveMaxLower) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->Return("orders", 32, 10)->applied);
  absl::StatusOr<ReturnOutcome> again = store_->Return("orders", 10, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->max, 10);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{11, 42}));
}

TEST_F(SqliteRangeStoreTest, ReturnOnUnknownCollectionCreatesNothing) {
  absl::StatusOr<ReturnOutcome> outcome = store_->Return("ghost", 32, 0);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_FALSE(store_->Get("ghost")->has_value());
}

TEST_F(SqliteRangeStoreTest, MalformedReturnIsInvalidArgument) {
  MustAllocate("orders", 32);
  EXPECT_EQ(store_->Return("orders", 32, 33).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Return("orders", 32, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StoredMax("orders"), 32);
}

TEST_F(SqliteRangeStoreTest, RangePastInt64MaxIsOutOfRangeAndChangesNothing) {
  const CollectionState near_end{kMax - 10, kMax - 42, clock_.Now()};
  ASSERT_TRUE(store_->PutForTesting("orders", near_end).ok());
  absl::StatusOr<Range> range = store_->Allocate("orders", 32, 0);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(range.status().message(), HasSubstr("INT64_MAX"));
  EXPECT_EQ(StoredMax("orders"), kMax - 10);
  // The last ten numbers can still be handed out, exactly.
  EXPECT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  EXPECT_EQ(store_->Allocate("orders", 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, ReturnAtInt64MaxSealsTheTopOfTheRange) {
  ASSERT_TRUE(
      store_->PutForTesting("orders", {kMax - 10, kMax - 42, clock_.Now()})
          .ok());
  ASSERT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  // Every number used: nothing to hand back, and nothing may come back later.
  absl::StatusOr<ReturnOutcome> all_used = store_->Return("orders", kMax, kMax);
  ASSERT_TRUE(all_used.ok()) << all_used.status();
  EXPECT_TRUE(all_used->applied);
  EXPECT_EQ(all_used->max, kMax);
  absl::StatusOr<ReturnOutcome> later =
      store_->Return("orders", kMax, kMax - 1);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(later->applied);
  EXPECT_EQ(later->max, kMax);
  absl::StatusOr<std::optional<CollectionState>> row = store_->Get("orders");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->max, kMax);
  EXPECT_EQ((*row)->return_floor, kMax);
  EXPECT_EQ(store_->Allocate("orders", 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, FloorAtInt64MaxRefusesReturnsBelowIt) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->SetFloor("orders", kMax)->raised);
  // No client holds a range ending at INT64_MAX; one claiming to must not
  // reopen the number the floor covers.
  absl::StatusOr<ReturnOutcome> forged =
      store_->Return("orders", kMax, kMax - 1);
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(forged->applied);
  EXPECT_EQ(StoredMax("orders"), kMax);
  EXPECT_EQ(store_->Allocate("orders", 1, 0).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, FloorAlsoBoundsReturnsOfEarlierRanges) {
  MustAllocate("orders", 32);  // 1-32, then raised past by the floor
  ASSERT_TRUE(store_->SetFloor("orders", 100)->raised);
  EXPECT_FALSE(store_->Return("orders", 100, 99)->applied);
  EXPECT_TRUE(store_->Return("orders", 100, 100)->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{101, 132}));
}

TEST_F(SqliteRangeStoreTest, FloorNearInt64MaxIsOutOfRange) {
  EXPECT_EQ(store_->Allocate("orders", 32, kMax - 5).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(store_->Get("orders")->has_value());
}

TEST_F(SqliteRangeStoreTest, RestartContinuesAboveEveryIssuedRange) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 64);
  Reopen();
  EXPECT_EQ(StoredMax("orders"), 96);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{97, 128}));
}

TEST_F(SqliteRangeStoreTest, FailingOperationDoesNotFailOthersInItsBatch) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_TRUE(
      store_->PutForTesting("full", CollectionState{kMax - 5, 1, clock_.Now()})
          .ok());
  const int64_t commits_before = store_->commits();

  absl::StatusOr<Range> first, ok_before, failing, ok_after;
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads, [&] { first = store_->Allocate("a", 32, 0); });
  Queue(threads, [&] { ok_before = store_->Allocate("b", 32, 0); });
  Queue(threads, [&] { failing = store_->Allocate("full", 32, 0); });
  Queue(threads, [&] { ok_after = store_->Allocate("c", 32, 0); });
  gate.Release();
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(store_->commits() - commits_before, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(ok_before.ok()) << ok_before.status();
  ASSERT_TRUE(ok_after.ok()) << ok_after.status();
  EXPECT_EQ(failing.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*ok_before, (Range{1, 32}));
  EXPECT_EQ(*ok_after, (Range{1, 32}));
  Reopen();
  EXPECT_EQ(StoredMax("b"), 32);
  EXPECT_EQ(StoredMax("c"), 32);
  EXPECT_EQ(StoredMax("full"), kMax - 5);
}

TEST_F(SqliteRangeStoreTest,
       QueuedOpsCommitInArrivalOrderAtMostMaxBatchAtATime) {
  CommitGate gate;
  Reopen(gate.Hook(), /*max_batch=*/2);
  const int64_t commits_before = store_->commits();
  absl::StatusOr<Range> first;
  constexpr int kQueued = 5;
  std::vector<absl::StatusOr<Range>> queued(kQueued);
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads, [&] { first = store_->Allocate("q", 1, 0); });
  for (int i = 0; i < kQueued; ++i) {
    Queue(threads, [&, i] { queued[i] = store_->Allocate("q", 1, 0); });
  }
  gate.Release();
  for (std::thread& t : threads) t.join();

  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (Range{1, 1}));
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_TRUE(queued[i].ok()) << i << ": " << queued[i].status();
    EXPECT_EQ(*queued[i], (Range{i + 2, i + 2})) << i;
  }
  // The held batch, then 2 + 2 + 1.
  EXPECT_EQ(store_->commits() - commits_before, 4);
}

// The results of the two failed-commit tests below: a held first batch,
// then a write and reads of the row it writes, queued into the next one.
struct WriteThenReads {
  absl::StatusOr<Range> first, write;
  absl::StatusOr<std::optional<CollectionState>> read_after_write;
  absl::StatusOr<std::vector<NamedCollectionState>> list;
};

TEST_F(SqliteRangeStoreTest, FailedCommitFailsOnlyItsOwnBatch) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  WriteThenReads r;
  std::vector<std::thread> threads;
  HoldFirstCommit(
      gate, threads, [&] { r.first = store_->Allocate("a", 32, 0); },
      absl::ResourceExhaustedError("disk is full (injected)"));
  Queue(threads, [&] { r.write = store_->Allocate("orders", 32, 0); });
  Queue(threads, [&] { r.read_after_write = store_->Get("orders"); });
  Queue(threads, [&] { r.list = store_->List("", 10); });
  gate.Release();  // the first batch's commit fails; the second is fine
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(r.first.status().code(), absl::StatusCode::kResourceExhausted);
  // The second batch (write, read, list) committed normally.
  ASSERT_TRUE(r.write.ok()) << r.write.status();
  EXPECT_EQ(*r.write, (Range{33, 64}));
  ASSERT_TRUE(r.read_after_write.ok()) << r.read_after_write.status();
  EXPECT_EQ((*r.read_after_write)->max, 64);
  ASSERT_TRUE(r.list.ok()) << r.list.status();
  EXPECT_EQ(r.list->size(), 1u);  // "a" never made it
}

TEST_F(SqliteRangeStoreTest, ReadsInABatchWhoseCommitFailsSeeOnlyWhatIsStored) {
  CommitGate gate;
  Reopen(gate.Hook());
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  WriteThenReads r;
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { r.first = store_->Allocate("a", 32, 0); });
  Queue(threads, [&] { r.write = store_->Allocate("orders", 32, 0); });
  Queue(threads, [&] { r.read_after_write = store_->Get("orders"); });
  Queue(threads, [&] { r.list = store_->List("", 10); });
  gate.FailNext(absl::ResourceExhaustedError("disk is full (injected)"));
  gate.Release();
  for (std::thread& t : threads) t.join();

  ASSERT_TRUE(r.first.ok()) << r.first.status();
  EXPECT_EQ(r.write.status().code(), absl::StatusCode::kResourceExhausted);
  // The reads answer, with the stored state: not the rolled-back 64.
  ASSERT_TRUE(r.read_after_write.ok()) << r.read_after_write.status();
  EXPECT_EQ((*r.read_after_write)->max, 32);
  ASSERT_TRUE(r.list.ok()) << r.list.status();
  ASSERT_EQ(r.list->size(), 2u);
  EXPECT_EQ((*r.list)[0].name, "a");
  EXPECT_EQ((*r.list)[1].state.max, 32);
  EXPECT_EQ(StoredMax("orders"), 32);
}

TEST_F(SqliteRangeStoreTest, ConcurrentAllocationsNeverOverlap) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::vector<Range>> got(kThreads * 2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int c = i % 2;
        absl::StatusOr<Range> r =
            store_->Allocate(c == 0 ? "even" : "odd", 1 + (t + i) % 40, 0);
        ASSERT_TRUE(r.ok()) << r.status();
        got[t * 2 + c].push_back(*r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int c = 0; c < 2; ++c) {
    std::vector<Range> all;
    for (int t = 0; t < kThreads; ++t) {
      all.insert(all.end(), got[t * 2 + c].begin(), got[t * 2 + c].end());
    }
    std::sort(all.begin(), all.end(),
              [](const Range& a, const Range& b) { return a.low < b.low; });
    // Ranges tile 1..Max exactly: no overlap, no gap.
    int64_t next = 1;
    for (const Range& r : all) {
      ASSERT_EQ(r.low, next);
      next = r.high + 1;
    }
    EXPECT_EQ(StoredMax(c == 0 ? "even" : "odd"), next - 1);
  }
}

TEST(SqliteRangeStoreOpenTest, FileThatIsNotSqliteIsFailedPrecondition) {
  TempDir dir;
  std::ofstream(dir.File("bad.db"))
      << "this is not a database, just text " << std::string(4096, 'x');
  SqliteRangeStoreOptions options;
  options.path = dir.File("bad.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("bad.db"));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

TEST(SqliteRangeStoreOpenTest, OtherApplicationsDatabaseIsFailedPrecondition) {
  TempDir dir;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("other.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  SqliteRangeStoreOptions options;
  options.path = dir.File("other.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("another application"));
}

// Writes a database as schema version 1 (column last_low) left it.
void WriteSchemaOneDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
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
  )sql";
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK)
      << error;
  sqlite3_free(error);
  sqlite3_close(db);
}

TEST(SqliteRangeStoreOpenTest, SchemaOneIsMigratedToReturnFloors) {
  TempDir dir;
  WriteSchemaOneDatabase(dir.File("v1.db"));
  SqliteRangeStoreOptions options;
  options.path = dir.File("v1.db");
  for (int open = 0; open < 2; ++open) {  // the second open finds version 2
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<NamedCollectionState>> rows =
        (*store)->List("", 10);
    ASSERT_TRUE(rows.ok()) << rows.status();
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
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->Return("issued", 64, 32)->applied);
  EXPECT_FALSE((*store)->Return("wrapped", kMax, kMax - 1)->applied);
  store->reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(options.path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 2);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(SqliteRangeStoreOpenTest, FailedMigrationNamesItselfAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("bad-v1.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  // Says version 1 but lacks its last_low column.
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE collections(name TEXT PRIMARY KEY, "
                         "max INTEGER);"
                         "PRAGMA application_id = 1214860399;"
                         "PRAGMA user_version = 1;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr("migrating schema version 1 to 2 (nothing changed)"));
  EXPECT_THAT(store.status().message(), HasSubstr("bad-v1.db"));
  EXPECT_THAT(store.status().message(), HasSubstr("last_low"));
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 1);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(SqliteRangeStoreOpenTest, NewerSchemaIsFailedPrecondition) {
  TempDir dir;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("new.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA application_id = 1214860399;"
                         "PRAGMA user_version = 99;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  SqliteRangeStoreOptions options;
  options.path = dir.File("new.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 99"));
}

TEST(SqliteRangeStoreOpenTest, CreatesMissingDirectories) {
  TempDir dir;
  SqliteRangeStoreOptions options;
  options.path = dir.File("a/b/c/hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Allocate("x", 32, 0)->high, 32);
}

TEST(SqliteRangeStoreOpenTest, PathUnderAFileIsUnavailable) {
  TempDir dir;
  std::ofstream(dir.File("plain")) << "x";
  SqliteRangeStoreOptions options;
  options.path = dir.File("plain/hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(store.status().message(), HasSubstr("plain"));
}

TEST(SyncModeTest, ParsesFullAndNormalOnly) {
  EXPECT_EQ(*ParseSyncMode("full"), SyncMode::kFull);
  EXPECT_EQ(*ParseSyncMode("NORMAL"), SyncMode::kNormal);
  EXPECT_EQ(ParseSyncMode("off").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hilo
