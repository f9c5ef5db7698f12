#include "service/store/sqlite/sqlite_judges.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/collection_rules.h"
#include "service/store/range_token.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"

namespace hilo::internal {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kMax;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;

// The judges on rows held over a file of `file_` (a map), so what each one
// leaves for the batch's write is seen directly.
class SqliteJudgesTest : public ::testing::Test {
 protected:
  SqliteJudgesTest()
      : rows_(
            [this](absl::string_view name)
                -> absl::StatusOr<std::optional<CollectionState>> {
              if (!read_error_.ok()) return read_error_;
              auto it = file_.find(std::string(name));
              if (it == file_.end()) return std::nullopt;
              return it->second;
            },
            100) {}

  std::vector<std::string> Changed() {
    std::vector<std::string> names;
    for (const SqliteHeldRows::Change& c : rows_.Changes()) {
      names.emplace_back(c.name);
    }
    return names;
  }

  const absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::map<std::string, CollectionState> file_;
  absl::Status read_error_;
  SqliteHeldRows rows_;
};

TEST_F(SqliteJudgesTest, AllocationsInOneBatchEachSeeTheOneBefore) {
  Allocation first, second;
  const uint64_t token = NextToken();
  ASSERT_THAT(JudgeAllocate(rows_, "orders", 32, 0, kNoFloorJumpLimit,
                            NextToken(), now_, &first),
              IsOk());
  ASSERT_THAT(JudgeAllocate(rows_, "orders", 32, 0, kNoFloorJumpLimit, token,
                            now_, &second),
              IsOk());
  EXPECT_EQ(first.range, (Range{1, 32}));
  EXPECT_TRUE(first.created);
  EXPECT_EQ(second.range, (Range{33, 64}));
  EXPECT_FALSE(second.created);
  const CollectionState& row = *rows_.Find("orders")->get();
  EXPECT_EQ(row.max, 64);
  EXPECT_EQ(row.return_floor, 32);
  EXPECT_EQ(row.range_token, RangeTokenDigest(token));
  EXPECT_EQ(row.updated_at, now_);
  EXPECT_THAT(Changed(), ::testing::ElementsAre("orders"));
}

TEST_F(SqliteJudgesTest, RefusedAllocationChangesNothing) {
  file_["full"] = CollectionState{.max = kMax - 5, .return_floor = 1};
  file_["low"] = CollectionState{.max = 10, .return_floor = 1};
  Allocation out;
  EXPECT_THAT(JudgeAllocate(rows_, "full", 32, 0, kNoFloorJumpLimit,
                            NextToken(), now_, &out),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("full")));
  absl::Status jump =
      JudgeAllocate(rows_, "low", 32, /*floor=*/1000,
                    /*max_floor_jump=*/100, NextToken(), now_, &out);
  EXPECT_THAT(jump, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsGuardRailRefusal(jump));
  EXPECT_THAT(Changed(), ::testing::IsEmpty());
  EXPECT_EQ(rows_.Find("full")->get()->max, kMax - 5);
}

TEST_F(SqliteJudgesTest, ReturnWithoutARowAppliesNothingAndWritesNothing) {
  ReturnOutcome out{.applied = true, .max = 99};
  ASSERT_THAT(JudgeReturn(rows_, "none", 32, 0, NextToken(), now_, &out),
              IsOk());
  EXPECT_FALSE(out.applied);
  EXPECT_EQ(out.max, 0);
  EXPECT_THAT(Changed(), ::testing::IsEmpty());
}

TEST_F(SqliteJudgesTest, ReturnManyJudgesItemsInOrderEachAlone) {
  const uint64_t token = NextToken();
  Allocation a;
  ASSERT_THAT(
      JudgeAllocate(rows_, "a", 32, 0, kNoFloorJumpLimit, token, now_, &a),
      IsOk());
  std::vector<absl::StatusOr<ReturnOutcome>> out;
  ASSERT_THAT(
      JudgeReturnMany({ReturnItem{"a", 32, 10, token},
                       ReturnItem{"a", 32, 10, token},  // applied just above
                       ReturnItem{"a", 5, 9, token},    // last > end
                       ReturnItem{"b", 8, 0, 0, /*foreign=*/true}},
                      rows_, now_, &out),
      IsOk());
  ASSERT_EQ(out.size(), 4u);
  ASSERT_THAT(out[0], IsOk());
  EXPECT_TRUE(out[0]->applied);
  EXPECT_EQ(out[0]->max, 10);
  ASSERT_THAT(out[1], IsOk());
  EXPECT_FALSE(out[1]->applied);
  EXPECT_EQ(out[1]->max, 10);
  EXPECT_THAT(out[2], StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(out[3], IsOk());
  EXPECT_FALSE(out[3]->applied);
  EXPECT_EQ(rows_.Find("a")->get()->max, 10);
}

TEST_F(SqliteJudgesTest, ReturnManyItemWhoseRowCannotBeReadFailsAlone) {
  file_["a"] = CollectionState{.max = 10};
  std::vector<absl::StatusOr<ReturnOutcome>> out;
  ASSERT_THAT(rows_.Find("a"), IsOk());  // held before the file fails
  read_error_ = absl::UnavailableError("disk I/O error (injected)");
  ASSERT_THAT(
      JudgeReturnMany({ReturnItem{"a", 10, 5, 0}, ReturnItem{"b", 10, 5, 0}},
                      rows_, now_, &out),
      IsOk());
  ASSERT_EQ(out.size(), 2u);
  ASSERT_THAT(out[0], IsOk());
  EXPECT_TRUE(out[0]->applied);
  EXPECT_THAT(out[1], StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(SqliteJudgesTest, SetFloorCreatesTheRowItNeeds) {
  FloorOutcome out;
  ASSERT_THAT(JudgeSetFloor(rows_, "f", 100, now_, &out), IsOk());
  EXPECT_TRUE(out.created);
  EXPECT_TRUE(out.raised);
  EXPECT_EQ(rows_.Find("f")->get()->max, 100);
  EXPECT_THAT(Changed(), ::testing::ElementsAre("f"));
}

TEST_F(SqliteJudgesTest, DeleteRemovesOnlyARowThatCanGo) {
  file_["unused"] = CollectionState{};
  file_["used"] = CollectionState{.max = 32, .return_floor = 0};
  CollectionState deleted;
  EXPECT_THAT(JudgeDelete(rows_, "none", &deleted),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none")));
  EXPECT_THAT(
      JudgeDelete(rows_, "used", &deleted),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("used")));
  ASSERT_THAT(JudgeDelete(rows_, "unused", &deleted), IsOk());
  EXPECT_FALSE(rows_.Find("unused")->get().has_value());
  EXPECT_THAT(Changed(), ::testing::ElementsAre("unused"));
  EXPECT_EQ(rows_.Commit(), -1);
}

}  // namespace
}  // namespace hilo::internal
