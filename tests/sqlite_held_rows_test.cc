#include "service/store/sqlite/sqlite_held_rows.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo::internal {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;

// A file of rows, as the loader sees it: counts its reads, and can fail.
class FakeFile {
 public:
  SqliteHeldRows::Loader Loader() {
    return [this](absl::string_view name)
               -> absl::StatusOr<std::optional<CollectionState>> {
      ++reads[std::string(name)];
      if (!fail.ok()) return fail;
      auto it = rows.find(std::string(name));
      if (it == rows.end()) return std::nullopt;
      return it->second;
    };
  }
  // Writes the batch's changes, as the batch writer does before COMMIT.
  void Write(SqliteHeldRows& held) {
    for (const SqliteHeldRows::Change& c : held.Changes()) {
      if (c.row->has_value()) {
        rows[std::string(c.name)] = **c.row;
      } else {
        rows.erase(std::string(c.name));
      }
    }
  }
  std::map<std::string, CollectionState> rows;
  std::map<std::string, int> reads;
  absl::Status fail;
};

CollectionState Max(int64_t max) { return CollectionState{.max = max}; }

std::vector<std::string> ChangedNames(SqliteHeldRows& rows) {
  std::vector<std::string> names;
  for (const SqliteHeldRows::Change& c : rows.Changes()) {
    names.emplace_back(c.name);
  }
  return names;
}

TEST(SqliteHeldRowsTest, ReadsARowFromTheFileOnceThenHoldsIt) {
  FakeFile file;
  file.rows["a"] = Max(10);
  SqliteHeldRows rows(file.Loader(), 100);
  for (int batch = 0; batch < 3; ++batch) {
    absl::StatusOr<SqliteHeldRows::Row> a = rows.Find("a");
    ASSERT_THAT(a, IsOk());
    ASSERT_TRUE(a->get().has_value());
    EXPECT_EQ(a->get()->max, 10 + batch);
    a->Set(Max(11 + batch));
    rows.Commit();
  }
  EXPECT_EQ(file.reads["a"], 1);
  EXPECT_EQ(rows.size(), 1u);
}

TEST(SqliteHeldRowsTest, AbortPutsBackWhatTheFileHolds) {
  FakeFile file;
  file.rows["kept"] = Max(10);
  file.rows["gone"] = Max(20);
  SqliteHeldRows rows(file.Loader(), 100);
  rows.Find("kept")->Set(Max(11));
  rows.Find("gone")->Set(std::nullopt);
  rows.Find("new")->Set(Max(5));
  rows.Abort();

  EXPECT_EQ(rows.Find("kept")->get()->max, 10);
  EXPECT_EQ(rows.Find("gone")->get()->max, 20);
  EXPECT_FALSE(rows.Find("new")->get().has_value());
  EXPECT_THAT(ChangedNames(rows), ::testing::IsEmpty());
  rows.Commit();
  EXPECT_EQ(rows.size(), 2u);  // "new" has no row: not held
}

TEST(SqliteHeldRowsTest, CommitKeepsTheBatchAndCountsRowsCreatedLessDeleted) {
  FakeFile file;
  file.rows["gone"] = Max(20);
  SqliteHeldRows rows(file.Loader(), 100);
  rows.Find("one")->Set(Max(1));
  rows.Find("two")->Set(Max(2));
  rows.Find("gone")->Set(std::nullopt);
  file.Write(rows);
  EXPECT_EQ(rows.Commit(), 1);
  EXPECT_EQ(rows.Find("one")->get()->max, 1);
  EXPECT_FALSE(rows.Find("gone")->get().has_value());
  EXPECT_EQ(file.reads["one"], 1);  // created, then held
  EXPECT_EQ(rows.Commit(), 0);
  EXPECT_EQ(rows.size(), 2u);
}

TEST(SqliteHeldRowsTest, ChangesNameEachChangedRowOnceInOrderOfFirstChange) {
  FakeFile file;
  file.rows["read"] = Max(1);
  file.rows["b"] = Max(1);
  SqliteHeldRows rows(file.Loader(), 100);
  ASSERT_THAT(rows.Find("read"), IsOk());
  rows.Find("b")->Set(Max(2));
  rows.Find("a")->Set(Max(1));
  rows.Find("b")->Set(Max(3));
  // Created and deleted again: the file never needs to hear of it.
  rows.Find("brief")->Set(Max(1));
  rows.Find("brief")->Set(std::nullopt);
  EXPECT_THAT(ChangedNames(rows), ::testing::ElementsAre("b", "a"));
  EXPECT_EQ(rows.Changes()[0].row->value().max, 3);
}

// Changes() lists pointers into the batch's records; a row touched after
// it could move them or change a row the list already left out, and the
// writer would put a wrong row in the file. So that stops the process.
// (ThreadSanitizer does not follow a death test's fork; the other builds
// run it.)
#if !defined(__SANITIZE_THREAD__)
TEST(SqliteHeldRowsDeathTest, ARowTouchedAfterChangesStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeFile file;
  file.rows["held"] = Max(1);
  SqliteHeldRows rows(file.Loader(), 100);
  rows.Find("held")->Set(Max(2));
  ASSERT_EQ(rows.Changes().size(), 1u);
  // Reading a row the batch already touched moves nothing: allowed.
  EXPECT_EQ(rows.Find("held")->get()->max, 2);
  EXPECT_DEATH(rows.Find("new")->Set(Max(1)),
               "a row touched after Changes\\(\\) in the same batch");
  EXPECT_DEATH(rows.Find("held")->Set(Max(3)),
               "a row touched after Changes\\(\\)");
  // The next batch may touch rows again.
  rows.Commit();
  rows.Find("held")->Set(Max(3));
  EXPECT_THAT(ChangedNames(rows), ::testing::ElementsAre("held"));
}
#endif

// A batch that touches more rows than the store keeps records for between
// batches (a burst of ReturnRanges of 1000 names each) gives that memory
// back when it ends, and ends like any other: its rows held, the next
// batch judged and listed as usual.
TEST(SqliteHeldRowsTest, ABatchOfManyThousandRowsEndsLikeAnyOther) {
  FakeFile file;
  SqliteHeldRows rows(file.Loader(), 10000);
  constexpr int kRows = 5000;
  for (int i = 0; i < kRows; ++i) {
    rows.Find("r" + std::to_string(i))->Set(Max(i + 1));
  }
  ASSERT_EQ(rows.Changes().size(), static_cast<size_t>(kRows));
  file.Write(rows);
  EXPECT_EQ(rows.Commit(), kRows);
  EXPECT_EQ(rows.size(), static_cast<size_t>(kRows));
  rows.Find("r7")->Set(Max(100));
  rows.Find("new")->Set(Max(1));
  EXPECT_THAT(ChangedNames(rows), ::testing::ElementsAre("r7", "new"));
  EXPECT_EQ(rows.Changes()[0].stored->value().max, 8);
  EXPECT_EQ(rows.Commit(), 1);
  EXPECT_EQ(rows.Find("r7")->get()->max, 100);
  EXPECT_EQ(file.reads["r7"], 1);  // held since the large batch
}

TEST(SqliteHeldRowsTest, FailedReadHoldsNothingAndIsTriedAgain) {
  FakeFile file;
  file.rows["a"] = Max(7);
  file.fail = absl::UnavailableError("disk I/O error (injected)");
  SqliteHeldRows rows(file.Loader(), 100);
  EXPECT_THAT(rows.Find("a"), StatusIs(absl::StatusCode::kUnavailable));
  rows.Abort();
  file.fail = absl::OkStatus();
  EXPECT_EQ(rows.Find("a")->get()->max, 7);
  EXPECT_EQ(file.reads["a"], 2);
}

TEST(SqliteHeldRowsTest, HoldsAtMostMaxRowsBetweenBatchesAndReadsDroppedAgain) {
  FakeFile file;
  SqliteHeldRows rows(file.Loader(), /*max_rows=*/4);
  for (int i = 0; i < 10; ++i) {
    rows.Find("c" + std::to_string(i))->Set(Max(i + 1));
  }
  EXPECT_EQ(rows.size(), 10u);  // a batch holds what it touches
  file.Write(rows);
  EXPECT_EQ(rows.Commit(), 10);
  EXPECT_LE(rows.size(), 4u);
  // What was dropped is read from the file, which has the batch's rows.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(rows.Find("c" + std::to_string(i))->get()->max, i + 1);
  }
}

// A name retired in a batch answers the Max it was retired at for the rest
// of that batch (its row's, or the file's if read and higher) and is to be
// written so; the retired Max is read from the file at most once a batch,
// and a store that was never told of retirements (no loader) still knows
// the one its own batch made.
TEST(SqliteHeldRowsTest, ARetiredNameKnowsItsRetiredMaxUntilTheBatchEnds) {
  FakeFile file;
  file.rows["a"] = Max(50);
  file.rows["b"] = Max(90);
  std::map<std::string, int64_t> retired = {{"a", 80}, {"b", 70}};
  int retired_reads = 0;
  SqliteHeldRows rows(file.Loader(), 100, [&](absl::string_view name) {
    ++retired_reads;
    auto it = retired.find(std::string(name));
    return absl::StatusOr<int64_t>(it == retired.end() ? 0 : it->second);
  });
  absl::StatusOr<SqliteHeldRows::Row> a = rows.Find("a");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->RetiredMax().value(), 80);
  a->Retire();
  EXPECT_EQ(a->RetiredMax().value(), 80);  // the file's, above the row's 50
  absl::StatusOr<SqliteHeldRows::Row> b = rows.Find("b");
  ASSERT_THAT(b, IsOk());
  b->Retire();
  EXPECT_EQ(b->RetiredMax().value(), 90);  // the row's; the file not read
  EXPECT_EQ(retired_reads, 1);
  const std::vector<SqliteHeldRows::Change> changes = rows.Changes();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].name, "a");
  EXPECT_FALSE(changes[0].row->has_value());
  EXPECT_EQ(changes[0].retired_max, 80);
  EXPECT_EQ(changes[1].name, "b");
  EXPECT_EQ(changes[1].retired_max, 90);
  EXPECT_EQ(rows.Commit(), -2);
  // Unknown between batches: read again.
  EXPECT_EQ(rows.Find("a")->RetiredMax().value(), 80);
  EXPECT_EQ(retired_reads, 2);
  rows.Abort();

  SqliteHeldRows unaware(file.Loader(), 100);
  absl::StatusOr<SqliteHeldRows::Row> c = unaware.Find("b");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->RetiredMax().value(), 0);
  c->Retire();
  EXPECT_EQ(c->RetiredMax().value(), 90);
  ASSERT_EQ(unaware.Changes().size(), 1u);
  EXPECT_EQ(unaware.Changes()[0].retired_max, 90);
}

}  // namespace
}  // namespace hilo::internal
