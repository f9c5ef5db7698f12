#include "service/store/sqlite/sqlite_batch_writer.h"

#include <sqlite3.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "service/store/sqlite/sqlite_judges.h"
#include "service/store/sqlite/sqlite_schema.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo::internal {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kMax;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;

// The writer on a real file with hilo's schema, its batches handed over
// directly (as GroupCommit would, one at a time). The file is read back
// through a connection of the test's own.
class SqliteBatchWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("w.db");
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db_), SQLITE_OK);
    // As the store opens it: the writer flushes SQLite's write-ahead log.
    ASSERT_EQ(
        sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
    ASSERT_THAT(CreateOrMigrateSqliteSchema(db_, path_, "", "", true), IsOk());
    MakeWriter();
  }
  void TearDown() override {
    writer_.reset();
    sqlite3_close(db_);
  }

  void MakeWriter() {
    writer_.reset();
    absl::StatusOr<std::unique_ptr<SqliteBatchWriter>> writer =
        SqliteBatchWriter::Create(
            db_, {.path = path_,
                  .clock = &clock_,
                  .check_file = [this] { return check_file_; },
                  .on_commit =
                      [this](absl::Duration, int writes, int64_t created) {
                        commits_.push_back({writes, created});
                      },
                  .before_commit_for_testing = [this] { return commit_; },
                  .before_write_for_testing = nullptr});
    ASSERT_THAT(writer, IsOk());
    writer_ = *std::move(writer);
  }

  // A write that allocates `size` in `name`; its outcome lands in *out.
  std::unique_ptr<SqliteBatchWriter::Write> Allocate(
      std::string name, int64_t size, absl::StatusOr<Range>* out) {
    auto write = std::make_unique<SqliteBatchWriter::Write>();
    auto allocation = std::make_shared<Allocation>();
    write->judge = [name, size, allocation](SqliteHeldRows& rows,
                                            absl::Time now) {
      return JudgeAllocate(rows, name, size, 0, kNoFloorJumpLimit, NextToken(),
                           now, allocation.get());
    };
    write->done = [out, allocation](absl::Status s) {
      if (s.ok()) {
        *out = allocation->range;
      } else {
        *out = s;
      }
    };
    return write;
  }

  // Sets a row as a batch of its own.
  absl::Status Put(const std::string& name, int64_t max) {
    auto write = std::make_unique<SqliteBatchWriter::Write>();
    absl::Status result;
    write->judge = [name, max](SqliteHeldRows& rows, absl::Time) {
      return JudgePut(rows, name,
                      CollectionState{.max = max, .return_floor = 1});
    };
    write->done = [&result](absl::Status s) { result = s; };
    RunBatch(Ops(std::move(write)));
    return result;
  }

  // Runs one batch and completes it, as GroupCommit does.
  void RunBatch(std::vector<std::unique_ptr<SqliteBatchWriter::Write>> ops) {
    std::vector<GroupCommit::Operation*> batch;
    for (auto& op : ops) batch.push_back(op.get());
    writer_->Run(batch);
    for (auto& op : ops) op->done(op->status);
  }

  std::vector<std::unique_ptr<SqliteBatchWriter::Write>> Ops(
      std::unique_ptr<SqliteBatchWriter::Write> a,
      std::unique_ptr<SqliteBatchWriter::Write> b = nullptr,
      std::unique_ptr<SqliteBatchWriter::Write> c = nullptr) {
    std::vector<std::unique_ptr<SqliteBatchWriter::Write>> ops;
    for (auto* op : {&a, &b, &c}) {
      if (*op != nullptr) ops.push_back(std::move(*op));
    }
    return ops;
  }

  // Max as the file holds it; -1 without a row.
  int64_t FileMax(const std::string& name) {
    sqlite3* reader = nullptr;
    sqlite3_stmt* stmt = nullptr;
    int64_t max = -1;
    sqlite3_open_v2(path_.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr);
    if (sqlite3_prepare_v2(reader, "SELECT max FROM collections WHERE name=?1",
                           -1, &stmt, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, name.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(stmt) == SQLITE_ROW) max = sqlite3_column_int64(stmt, 0);
    } else {
      ADD_FAILURE() << sqlite3_errmsg(reader);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(reader);
    return max;
  }

  TempDir dir_;
  std::string path_;
  sqlite3* db_ = nullptr;
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  absl::Status check_file_;
  absl::Status commit_;
  std::vector<std::pair<int, int64_t>> commits_;  // writes, created
  std::unique_ptr<SqliteBatchWriter> writer_;
};

TEST_F(SqliteBatchWriterTest, BatchWritesEachChangedRowOnceAndCommits) {
  absl::StatusOr<Range> a1, a2, b;
  RunBatch(Ops(Allocate("a", 32, &a1), Allocate("b", 8, &b),
               Allocate("a", 32, &a2)));
  ASSERT_THAT(a1, IsOk());
  ASSERT_THAT(a2, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(*a1, (Range{1, 32}));
  EXPECT_EQ(*a2, (Range{33, 64}));
  EXPECT_EQ(*b, (Range{1, 8}));
  EXPECT_EQ(writer_->rows_written(), 2);
  EXPECT_THAT(commits_, ::testing::ElementsAre(std::pair{3, int64_t{2}}));
  EXPECT_EQ(FileMax("a"), 64);
  EXPECT_EQ(FileMax("b"), 8);
  EXPECT_TRUE(sqlite3_get_autocommit(db_));  // the transaction is over
}

TEST_F(SqliteBatchWriterTest, FailedCommitFailsTheBatchAndKeepsTheFilesRows) {
  absl::StatusOr<Range> first, refused, lost;
  RunBatch(Ops(Allocate("a", 32, &first)));
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(Put("full", kMax - 5), IsOk());

  commit_ = absl::ResourceExhaustedError("disk is full (injected)");
  RunBatch(Ops(Allocate("a", 32, &lost), Allocate("full", 32, &refused)));
  // The refused write keeps its own error; the other has the commit's.
  EXPECT_THAT(lost, StatusIs(absl::StatusCode::kResourceExhausted,
                             HasSubstr("disk is full")));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(FileMax("a"), 32);

  commit_ = absl::OkStatus();
  absl::StatusOr<Range> again;
  RunBatch(Ops(Allocate("a", 32, &again)));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*again, (Range{33, 64}));  // judged on what the file holds
  EXPECT_EQ(FileMax("a"), 64);
}

TEST_F(SqliteBatchWriterTest, FileFoundLostBeforeCommitFailsTheBatch) {
  absl::StatusOr<Range> a;
  check_file_ = absl::UnavailableError("the database file was replaced");
  RunBatch(Ops(Allocate("a", 32, &a)));
  EXPECT_THAT(a,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("replaced")));
  EXPECT_EQ(FileMax("a"), -1);
  EXPECT_EQ(writer_->rows_held(), 0u);
}

// Some I/O errors make SQLite end the transaction itself: whatever the
// judges decided, nothing of the batch is in the file, so every write of it
// fails, those judged before the loss included.
TEST_F(SqliteBatchWriterTest, TransactionEndedUnderTheBatchFailsEveryWrite) {
  absl::StatusOr<Range> before, after;
  auto ends = std::make_unique<SqliteBatchWriter::Write>();
  absl::Status ended;
  ends->judge = [this](SqliteHeldRows&, absl::Time) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return absl::OkStatus();
  };
  ends->done = [&](absl::Status s) { ended = s; };
  RunBatch(Ops(Allocate("a", 32, &before), std::move(ends),
               Allocate("b", 32, &after)));
  for (const absl::Status& s : {before.status(), ended, after.status()}) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable,
                            HasSubstr("ended unexpectedly")));
  }
  EXPECT_EQ(FileMax("a"), -1);
  EXPECT_THAT(commits_, ::testing::IsEmpty());
  absl::StatusOr<Range> next;
  RunBatch(Ops(Allocate("a", 32, &next)));
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, (Range{1, 32}));
}

}  // namespace
}  // namespace hilo::internal
