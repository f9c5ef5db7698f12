// SqliteRangeStore opened with read_only: what a tool that inspects a
// stopped server's database sees, and that it changes nothing. Apart from
// sqlite_range_store_test.cc so the read-only contract reads in one place.
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/range_token.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::IsOkAndHolds;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Optional;

std::unique_ptr<SqliteRangeStore> OpenWriter(const std::string& path) {
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  EXPECT_THAT(store.status(), IsOk());
  return store.ok() ? *std::move(store) : nullptr;
}

absl::StatusOr<std::unique_ptr<SqliteRangeStore>> OpenReadOnly(
    const std::string& path) {
  SqliteRangeStoreOptions options;
  options.path = path;
  options.read_only = true;
  return SqliteRangeStore::Open(std::move(options));
}

int64_t FileSize(const std::string& path) {
  struct stat st = {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST(SqliteRangeStoreReadOnlyTest, SeesWhatTheWriterCommitted) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  std::unique_ptr<SqliteRangeStore> writer = OpenWriter(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_THAT(writer->Allocate("a", 10, 0, NewRangeToken()).status(), IsOk());
  ASSERT_THAT(writer->Allocate("b", 7, 0, NewRangeToken()).status(), IsOk());
  ASSERT_THAT(writer->Allocate("a", 5, 0, NewRangeToken()).status(), IsOk());

  // The writer stays open: the rows are still in its WAL.
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> reader = OpenReadOnly(path);
  ASSERT_THAT(reader.status(), IsOk());
  EXPECT_THAT((*reader)->Get("a"),
              IsOkAndHolds(Optional(Field(&CollectionState::max, 15))));
  EXPECT_THAT((*reader)->Get("c"), IsOkAndHolds(::testing::Eq(std::nullopt)));
  absl::StatusOr<std::vector<NamedCollectionState>> listed =
      (*reader)->List("", 10);
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "a");
  EXPECT_EQ((*listed)[0].state.max, 15);
  EXPECT_EQ((*listed)[1].name, "b");
  EXPECT_EQ((*listed)[1].state.max, 7);
  EXPECT_EQ((*reader)->collection_count(), 2);
}

TEST(SqliteRangeStoreReadOnlyTest, RefusesEveryWriteAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  std::unique_ptr<SqliteRangeStore> writer = OpenWriter(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_THAT(writer->Allocate("a", 10, 0, NewRangeToken()).status(), IsOk());
  const int64_t wal_before = FileSize(path + "-wal");

  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> reader = OpenReadOnly(path);
  ASSERT_THAT(reader.status(), IsOk());
  SqliteRangeStore& store = **reader;
  EXPECT_THAT(
      store.Allocate("a", 10, 0, NewRangeToken()).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("read-only")));
  EXPECT_THAT(store.Allocate("new", 10, 0, NewRangeToken()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store.Return("a", 10, 5, 0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store.SetFloor("a", 100).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store.PutForTesting("a", CollectionState{.max = 1}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  reader->reset();

  EXPECT_EQ(FileSize(path + "-wal"), wal_before);
  EXPECT_THAT(writer->Get("a"),
              IsOkAndHolds(Optional(Field(&CollectionState::max, 10))));
  EXPECT_THAT(writer->Get("new"), IsOkAndHolds(::testing::Eq(std::nullopt)));
}

TEST(SqliteRangeStoreReadOnlyTest, MissingFileIsNotFoundAndIsNotCreated) {
  TempDir dir;
  const std::string path = dir.File("absent/hilo.db");
  EXPECT_THAT(OpenReadOnly(path).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(path)));
  EXPECT_EQ(FileSize(dir.File("absent")), -1);
}

TEST(SqliteRangeStoreReadOnlyTest, FileOfAnotherKindIsFailedPrecondition) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  std::ofstream(path) << "not a database, but long enough to be read as a "
                         "page header by SQLite; it is text all the same\n";
  EXPECT_THAT(OpenReadOnly(path).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(path)));
}

}  // namespace
}  // namespace hilo
