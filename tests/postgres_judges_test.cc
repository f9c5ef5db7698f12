// The PostgreSQL store's judges, one per kind of request, on rows in
// memory: what each does to the batch's rows and what it answers, and that
// a refusal changes nothing. Expected values come from the contract of
// range_store.h (a range starts above max(Max, floor); a return applies
// only at Max, above the return floor, with the range's token).
#include "service/store/postgres/postgres_judges.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/range_token.h"
#include "testing/status_matchers.h"

namespace hilo::internal {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// A batch that read `name`'s row as `state` (under its row lock).
void Stored(PostgresBatch& batch, const std::string& name,
            const CollectionState& state) {
  PostgresBatch::Row& row = batch.rows[name];
  row.stored = state;
  row.now = state;
  row.locked = true;
}

TEST(PostgresJudgesTest, AllocateCreatesARowThenGoesOnAboveIt) {
  PostgresBatch batch({});
  Allocation first, second;
  ASSERT_THAT(JudgeAllocate(batch, "a", 10, 0, kNoFloorJumpLimit, 7, kNow,
                            /*may_create=*/true, &first),
              IsOk());
  EXPECT_EQ(first.range.low, 1);
  EXPECT_EQ(first.range.high, 10);
  EXPECT_TRUE(first.created);
  ASSERT_THAT(JudgeAllocate(batch, "a", 5, 0, kNoFloorJumpLimit, 8, kNow,
                            /*may_create=*/true, &second),
              IsOk());
  EXPECT_EQ(second.range.low, 11);
  EXPECT_EQ(second.range.high, 15);
  EXPECT_FALSE(second.created);
  const PostgresBatch::Row& row = batch.rows["a"];
  EXPECT_TRUE(row.dirty);
  EXPECT_FALSE(row.stored.has_value());
  EXPECT_EQ(row.now->max, 15);
  EXPECT_EQ(row.now->range_token, RangeTokenDigest(8));
}

TEST(PostgresJudgesTest, AllocateAboveAFloorStartsAboveIt) {
  PostgresBatch batch({});
  Stored(batch, "a", {.max = 20});
  Allocation out;
  ASSERT_THAT(
      JudgeAllocate(batch, "a", 3, 100, kNoFloorJumpLimit, 7, kNow, true, &out),
      IsOk());
  EXPECT_EQ(out.range.low, 101);
  EXPECT_EQ(out.range.high, 103);
}

TEST(PostgresJudgesTest, AllocateRefusalsChangeNothing) {
  PostgresBatch batch({});
  Stored(batch, "a", {.max = 20});
  Allocation out;
  // AllocateExisting of a name without a row.
  EXPECT_TRUE(IsNoRowRefusal(JudgeAllocate(batch, "none", 3, 0,
                                           kNoFloorJumpLimit, 7, kNow,
                                           /*may_create=*/false, &out)));
  // A floor too far above Max (the guard rail), and a range past INT64_MAX.
  EXPECT_THAT(JudgeAllocate(batch, "a", 3, 1000, 100, 7, kNow, true, &out),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      JudgeAllocate(batch, "a", 3, std::numeric_limits<int64_t>::max() - 1,
                    kNoFloorJumpLimit, 7, kNow, true, &out),
      StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_FALSE(batch.rows["a"].dirty);
  EXPECT_EQ(batch.rows["a"].now->max, 20);
  EXPECT_FALSE(batch.rows["none"].dirty);
  EXPECT_FALSE(batch.rows["none"].now.has_value());
}

TEST(PostgresJudgesTest, ReturnAppliesOnlyAtMaxWithTheToken) {
  PostgresBatch batch({});
  Stored(batch, "a",
         {.max = 15, .return_floor = 10, .range_token = RangeTokenDigest(9)});
  ReturnOutcome wrong_token, applied, no_row;
  ASSERT_THAT(JudgeReturn(batch, "a", 15, 12, 4, kNow, &wrong_token), IsOk());
  EXPECT_FALSE(wrong_token.applied);
  EXPECT_EQ(wrong_token.max, 15);
  EXPECT_FALSE(batch.rows["a"].dirty);
  ASSERT_THAT(JudgeReturn(batch, "a", 15, 12, 9, kNow, &applied), IsOk());
  EXPECT_TRUE(applied.applied);
  EXPECT_EQ(applied.max, 12);
  EXPECT_TRUE(batch.rows["a"].dirty);
  EXPECT_EQ(batch.rows["a"].now->max, 12);
  ASSERT_THAT(JudgeReturn(batch, "none", 5, 0, 9, kNow, &no_row), IsOk());
  EXPECT_FALSE(no_row.applied);
  EXPECT_EQ(no_row.max, 0);
  EXPECT_FALSE(batch.rows["none"].dirty);
}

TEST(PostgresJudgesTest, ReturnManyJudgesEachItemAlone) {
  PostgresBatch batch({});
  Stored(batch, "a",
         {.max = 15, .return_floor = 10, .range_token = RangeTokenDigest(9)});
  Stored(batch, "f", {.max = 40});
  batch.held.insert("h");
  batch.held.insert("c");
  batch.creating_elsewhere.insert("c");
  std::vector<absl::StatusOr<ReturnOutcome>> out;
  const int locked = JudgeReturnMany(
      batch,
      {{.collection = "a", .end = 15, .last = 12, .token = 9},
       {.collection = "a", .end = 15, .last = 12, .token = 9},  // Max is 12
       {.collection = "bad", .end = 1, .last = 2, .token = 9},
       {.collection = "h", .end = 5, .last = 0, .token = 9},
       {.collection = "c", .end = 5, .last = 0, .token = 9},
       {.collection = "f", .end = 40, .last = 0, .token = 1, .foreign = true}},
      kNow, absl::Seconds(2), &out);
  EXPECT_EQ(locked, 2);
  ASSERT_EQ(out.size(), 6u);
  ASSERT_THAT(out[0], IsOk());
  EXPECT_TRUE(out[0]->applied);
  EXPECT_EQ(out[0]->max, 12);
  ASSERT_THAT(out[1], IsOk());
  EXPECT_FALSE(out[1]->applied);
  EXPECT_EQ(out[1]->max, 12);
  EXPECT_THAT(out[2], StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(out[3], StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("\"h\" is locked")));
  EXPECT_THAT(out[4], StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("\"c\" is being created")));
  // A foreign item only reads Max; its row stays as stored.
  ASSERT_THAT(out[5], IsOk());
  EXPECT_FALSE(out[5]->applied);
  EXPECT_EQ(out[5]->max, 40);
  EXPECT_FALSE(batch.rows["f"].dirty);
  EXPECT_EQ(batch.rows.count("h"), 0u);
}

TEST(PostgresJudgesTest, SetFloorCreatesOrRaisesButNeverLowers) {
  PostgresBatch batch({});
  Stored(batch, "a", {.max = 50, .return_floor = 40});
  FloorOutcome lower, created;
  // Below Max and the return floor: nothing to change.
  ASSERT_THAT(JudgeSetFloor(batch, "a", 30, kNow, &lower), IsOk());
  EXPECT_FALSE(lower.raised);
  EXPECT_EQ(lower.max, 50);
  EXPECT_FALSE(batch.rows["a"].dirty);
  EXPECT_EQ(batch.rows["a"].now->max, 50);
  EXPECT_EQ(batch.rows["a"].now->return_floor, 40);
  ASSERT_THAT(JudgeSetFloor(batch, "new", 100, kNow, &created), IsOk());
  EXPECT_TRUE(created.created);
  EXPECT_TRUE(created.raised);
  EXPECT_TRUE(batch.rows["new"].dirty);
  EXPECT_EQ(batch.rows["new"].now->max, 100);
}

TEST(PostgresJudgesTest, DeleteOnlyARowThatCanNeverBringANumberBack) {
  PostgresBatch batch({});
  Stored(batch, "used", {.max = 5});
  Stored(batch, "unused", {});
  CollectionState deleted;
  EXPECT_THAT(JudgeDelete(batch, "none", &deleted),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"none\"")));
  EXPECT_THAT(JudgeDelete(batch, "used", &deleted),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(batch.rows["used"].dirty);
  ASSERT_THAT(JudgeDelete(batch, "unused", &deleted), IsOk());
  EXPECT_TRUE(batch.rows["unused"].dirty);
  EXPECT_FALSE(batch.rows["unused"].now.has_value());
}

// Retirement (range_store.h, RetireAsync): the row goes whatever it holds;
// a new row of the name starts at the higher Max it was retired at.
TEST(PostgresJudgesTest, RetireRemovesAnyRowAndANewRowStartsAboveIt) {
  PostgresBatch batch({});
  Stored(batch, "used", {.max = 40, .return_floor = 30});
  CollectionState retired;
  EXPECT_THAT(JudgeRetire(batch, "none", &retired),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"none\"")));
  EXPECT_FALSE(batch.rows["none"].dirty);
  ASSERT_THAT(JudgeRetire(batch, "used", &retired), IsOk());
  EXPECT_EQ(retired.max, 40);
  PostgresBatch::Row& row = batch.rows["used"];
  EXPECT_TRUE(row.dirty);
  EXPECT_TRUE(row.retired);
  EXPECT_FALSE(row.now.has_value());
  EXPECT_EQ(row.retired_max, 40);
  Allocation again;
  ASSERT_THAT(JudgeAllocate(batch, "used", 5, 0, kNoFloorJumpLimit, 9, kNow,
                            /*may_create=*/true, &again),
              IsOk());
  EXPECT_EQ(again.range.low, 41);
  EXPECT_EQ(again.range.high, 45);
  EXPECT_TRUE(again.created);
  // Read from hilo_retired (ReadRetired): SetFloor below it creates the
  // row there, raising nothing.
  batch.rows["old"].retired_max = 70;
  FloorOutcome floored;
  ASSERT_THAT(JudgeSetFloor(batch, "old", 10, kNow, &floored), IsOk());
  EXPECT_TRUE(floored.created);
  EXPECT_FALSE(floored.raised);
  EXPECT_EQ(batch.rows["old"].now->max, 70);
  EXPECT_EQ(batch.rows["old"].now->return_floor, 70);
}

TEST(PostgresJudgesTest, PutAndGetSeeTheBatchesRows) {
  PostgresBatch batch({});
  EXPECT_FALSE(JudgeGet(batch, "a").has_value());
  ASSERT_THAT(JudgePut(batch, "a", {.max = 77}), IsOk());
  EXPECT_TRUE(batch.rows["a"].dirty);
  ASSERT_TRUE(JudgeGet(batch, "a").has_value());
  EXPECT_EQ(JudgeGet(batch, "a")->max, 77);
}

TEST(PostgresJudgesTest, CreatesRowWhenNoneOnlyForCreationsTheRulesAllow) {
  auto request = [](PostgresRequest::Kind kind, int64_t floor,
                    int64_t max_floor_jump, bool may_create = true) {
    auto r = std::make_unique<PostgresRequest>();
    r->kind = kind;
    r->name = "a";
    r->size = 5;
    r->floor = floor;
    r->max_floor_jump = max_floor_jump;
    r->may_create = may_create;
    r->token = 7;
    return r;
  };
  using Kind = PostgresRequest::Kind;
  constexpr int64_t kTop = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(CreatesRowWhenNone(*request(Kind::kAllocate, 100, 100)));
  EXPECT_FALSE(CreatesRowWhenNone(*request(Kind::kAllocate, 101, 100)));
  // A retired name's new row starts at its retired Max.
  EXPECT_TRUE(CreatesRowWhenNone(*request(Kind::kAllocate, 101, 100), 1));
  EXPECT_FALSE(CreatesRowWhenNone(*request(Kind::kAllocate, 202, 100), 101));
  EXPECT_TRUE(CreatesRowWhenNone(*request(Kind::kAllocate, kTop - 5, kTop)));
  EXPECT_FALSE(CreatesRowWhenNone(*request(Kind::kAllocate, kTop - 4, kTop)));
  EXPECT_FALSE(CreatesRowWhenNone(
      *request(Kind::kAllocate, 0, kTop, /*may_create=*/false)));
  EXPECT_TRUE(CreatesRowWhenNone(*request(Kind::kSetFloor, 10, 0)));
  EXPECT_TRUE(CreatesRowWhenNone(*request(Kind::kPut, 0, 0)));
  EXPECT_FALSE(CreatesRowWhenNone(*request(Kind::kReturn, 0, 0)));
  EXPECT_FALSE(CreatesRowWhenNone(*request(Kind::kDelete, 0, 0)));
}

}  // namespace
}  // namespace hilo::internal
