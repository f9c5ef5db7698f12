// An SQLite database remembers the node tag it issued under (README "The
// node tag"): a file started under another tag (volumes mixed up, a tag
// renamed by hand) would hand its numbers out again under a tag whose real
// owner issued them already. So a file stores its tag at creation, or at
// the first start of a file from before tags were stored; an open under
// another tag is refused with one line naming both and changes nothing;
// re-tagging is explicit (retag_from).
#include <sqlite3.h>

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<std::unique_ptr<SqliteRangeStore>> OpenAs(
    const std::string& path, const std::string& tag,
    const std::string& retag_from = "") {
  SqliteRangeStoreOptions options;
  options.path = path;
  options.node_tag = tag;
  options.retag_from = retag_from;
  return SqliteRangeStore::Open(std::move(options));
}

// The next range of "orders" from the file at `path` opened as `tag`.
Range NextUnder(const std::string& path, const std::string& tag) {
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store = OpenAs(path, tag);
  EXPECT_THAT(store, IsOk());
  if (!store.ok()) return Range{};
  return (*store)->Allocate("orders", 32, 0, NextToken()).value_or(Range{});
}

TEST(SqliteNodeTagTest, FileOfAnotherTagIsRefusedWithOneLineNamingBoth) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  ASSERT_EQ(NextUnder(path, "A"), (Range{1, 32}));
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> other = OpenAs(path, "B");
  EXPECT_THAT(
      other,
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(path), HasSubstr("under node tag A, not B"),
                     HasSubstr("--retag_database=A"), Not(HasSubstr("\n")))));
  // The refusal changed nothing: A continues where it was.
  EXPECT_EQ(NextUnder(path, "A"), (Range{33, 64}));
}

TEST(SqliteNodeTagTest, OlderFileTakesTheTagOfItsFirstStart) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  // A file of schema version 4, from before tags were stored.
  ASSERT_EQ(NextUnder(path, ""), (Range{1, 32}));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db,
                         "DROP TABLE node; ALTER TABLE collections DROP COLUMN "
                         "ceiling; PRAGMA user_version = 4;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  EXPECT_EQ(NextUnder(path, "C"), (Range{33, 64}));
  EXPECT_THAT(OpenAs(path, "A"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("under node tag C, not A")));
}

TEST(SqliteNodeTagTest, RetagOnPurposeMovesTheFileToTheNewTag) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  ASSERT_EQ(NextUnder(path, "A"), (Range{1, 32}));
  // Naming a tag the file does not have re-tags nothing.
  EXPECT_THAT(OpenAs(path, "B", /*retag_from=*/"C"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("under node tag A, not B"),
                             HasSubstr("--retag_database names C"))));
  {
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        OpenAs(path, "B", /*retag_from=*/"A");
    ASSERT_THAT(store, IsOk());
    EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{33, 64}));
  }
  // The flag re-tags once: left in place it is refused, or it would re-tag
  // a file of A's put here by mistake later.
  EXPECT_THAT(OpenAs(path, "B", /*retag_from=*/"A"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("remove --retag_database=A")));
  // From now on the file is B's: B opens without the flag, A is refused.
  EXPECT_EQ(NextUnder(path, "B"), (Range{65, 96}));
  EXPECT_THAT(OpenAs(path, "A"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("under node tag B, not A")));
}

// Tools open a file without a tag: they neither store nor check one.
TEST(SqliteNodeTagTest, OpenWithoutATagLeavesTheTagAlone) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  ASSERT_EQ(NextUnder(path, "D"), (Range{1, 32}));
  ASSERT_EQ(NextUnder(path, ""), (Range{33, 64}));
  EXPECT_THAT(OpenAs(path, "E"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("under node tag D, not E")));
}

}  // namespace
}  // namespace hilo
