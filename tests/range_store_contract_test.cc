// The RangeStore contract (range_store.h), run against every backend: the
// embedded SQLite store and the shared PostgreSQL one (a real server, see
// postgres_instance.h). A test here says what any store must do; what one
// backend does beyond it lives in that backend's own test.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/await.h"
#include "service/store/collection_rules.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/range_store.h"
#include "service/store/range_token.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/postgres_instance.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kMax;
using ::hilo::testing_util::kNeverIssued;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

enum class Backend { kSqlite, kPostgres };

void PrintTo(Backend backend, std::ostream* os) {
  *os << (backend == Backend::kSqlite ? "SQLite" : "PostgreSQL");
}

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

class RangeStoreContractTest : public ::testing::TestWithParam<Backend>,
                               public testing_util::RangeStoreFixture {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
      ASSERT_THAT(postgres, IsOk());
      absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
      ASSERT_THAT(uri, IsOk());
      uri_ = *uri;
    }
    Reopen();
  }

  // A new store object on the same data, as after a restart.
  void Reopen() {
    store_.reset();
    if (GetParam() == Backend::kSqlite) {
      SqliteRangeStoreOptions options;
      options.path = dir_.File("hilo.db");
      options.clock = &clock_;
      absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
          SqliteRangeStore::Open(std::move(options));
      ASSERT_THAT(store, IsOk());
      store_ = *std::move(store);
    } else {
      PostgresRangeStoreOptions options;
      options.uri = uri_;
      options.clock = &clock_;
      absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
          PostgresRangeStore::Open(std::move(options));
      ASSERT_THAT(store, IsOk());
      store_ = *std::move(store);
    }
  }

  TempDir dir_;
  std::string uri_;  // Postgres: a schema of this test's own
};

INSTANTIATE_TEST_SUITE_P(Backends, RangeStoreContractTest,
                         ::testing::Values(Backend::kSqlite,
                                           Backend::kPostgres),
                         BackendName);

TEST_P(RangeStoreContractTest, NewCollectionStartsAtOneAndContinues) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  EXPECT_EQ(MustAllocate("orders", 64), (Range{65, 128}));
  EXPECT_EQ(MustAllocate("users", 32), (Range{1, 32}));
}

TEST_P(RangeStoreContractTest, RecordsMaxReturnFloorAndTimeOfChange) {
  MustAllocate("orders", 32);
  clock_.Advance(absl::Seconds(7));
  MustAllocate("orders", 32);
  absl::StatusOr<std::optional<CollectionState>> state = store_->Get("orders");
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->max, 64);
  EXPECT_EQ((*state)->return_floor, 32);
  EXPECT_EQ((*state)->updated_at, clock_.Now());
}

TEST_P(RangeStoreContractTest, UnknownCollectionHasNoRow) {
  absl::StatusOr<std::optional<CollectionState>> state = store_->Get("none");
  ASSERT_THAT(state, IsOk());
  EXPECT_FALSE(state->has_value());
}

TEST_P(RangeStoreContractTest, FloorRaisesTheRangeButNeverLowersIt) {
  EXPECT_EQ(MustAllocate("orders", 32, 100), (Range{101, 132}));
  EXPECT_EQ(MustAllocate("orders", 32, 50), (Range{133, 164}));
}

TEST_P(RangeStoreContractTest, NamesAreComparedByteForByte) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("Orders", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("orders ", 32), (Range{1, 32}));
  EXPECT_EQ(MustAllocate("\xC3\xA9", 32), (Range{1, 32}));   // precomposed
  EXPECT_EQ(MustAllocate("e\xCC\x81", 32), (Range{1, 32}));  // decomposed
}

TEST_P(RangeStoreContractTest, ReturnOfUnusedTailLetsNextRangeContinue) {
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 1);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 1);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{2, 33}));
}

// ReturnManyAsync judges each item as Return would, in order: a duplicate
// is refused, a chained pair applies, a malformed item is refused alone,
// another node's item only reports Max.
TEST_P(RangeStoreContractTest, ReturnManyJudgesEachItemInOrder) {
  MustAllocate("a", 32);  // 1-32
  MustAllocate("b", 32);  // 1-32
  MustAllocate("b", 32);  // 33-64, right above
  MustAllocate("c", 32);
  MustAllocate("d", 32);
  std::vector<ReturnItem> items = {
      {"a", 32, 4, TokenOf("a", 32)},
      {"a", 32, 4, TokenOf("a", 32)},   // the same again
      {"b", 64, 32, TokenOf("b", 64)},  // the later range whole, ...
      {"b", 32, 9, TokenOf("b", 32)},   // ... then the earlier one's tail
      {"c", 32, 40, TokenOf("c", 32)},  // last above end
      {"c", 32, 5, kNeverIssued},       // a guessed token
      {"d", 32, 5, TokenOf("d", 32), /*foreign=*/true},
      {"ghost", 32, 0, kNeverIssued},
  };
  absl::StatusOr<std::vector<absl::StatusOr<ReturnOutcome>>> outcomes =
      base::Await<absl::StatusOr<std::vector<absl::StatusOr<ReturnOutcome>>>>(
          [&](StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) {
            store_->ReturnManyAsync(items, std::move(done));
          });
  ASSERT_THAT(outcomes, IsOk());
  ASSERT_EQ(outcomes->size(), items.size());
  auto judged = [&](size_t i, bool applied, int64_t max) {
    ASSERT_THAT((*outcomes)[i], IsOk()) << i;
    EXPECT_EQ((*outcomes)[i]->applied, applied) << i;
    EXPECT_EQ((*outcomes)[i]->max, max) << i;
  };
  judged(0, true, 4);
  judged(1, false, 4);
  judged(2, true, 32);
  judged(3, true, 9);
  EXPECT_THAT((*outcomes)[4], StatusIs(absl::StatusCode::kInvalidArgument));
  judged(5, false, 32);
  judged(6, false, 32);
  judged(7, false, 0);
  EXPECT_EQ(StoredMax("a"), 4);
  EXPECT_EQ(StoredMax("b"), 9);
  EXPECT_EQ(MustGet("b").range_token, 0u);
  EXPECT_EQ(StoredMax("c"), 32);
  EXPECT_EQ(MustGet("c").range_token, RangeTokenDigest(TokenOf("c", 32)));
  EXPECT_EQ(StoredMax("d"), 32);
  EXPECT_EQ(MustGet("d").range_token, RangeTokenDigest(TokenOf("d", 32)));
  EXPECT_EQ(StoredMax("ghost"), -1);
}

TEST_P(RangeStoreContractTest, ReturnOfWholeRangeIsApplied) {
  MustAllocate("orders", 32);
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 0);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
}

TEST_P(RangeStoreContractTest, StaleReturnIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // another client took 33-64
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 5);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 64);
  EXPECT_EQ(StoredMax("orders"), 64);
}

TEST_P(RangeStoreContractTest, ReturnBelowLastIssuedLowIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  absl::StatusOr<ReturnOutcome> below = Return("orders", 64, 10);
  ASSERT_THAT(below, IsOk());
  EXPECT_FALSE(below->applied);
  EXPECT_EQ(below->max, 64);
  absl::StatusOr<ReturnOutcome> edge = Return("orders", 64, 32);
  ASSERT_THAT(edge, IsOk());
  EXPECT_TRUE(edge->applied);
  EXPECT_EQ(edge->max, 32);
}

TEST_P(RangeStoreContractTest, SecondReturnCannotMoveMaxLower) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 10)->applied);
  absl::StatusOr<ReturnOutcome> again = Return("orders", 10, 0);
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->max, 10);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{11, 42}));
}

TEST_P(RangeStoreContractTest, ReturnOnUnknownCollectionCreatesNothing) {
  absl::StatusOr<ReturnOutcome> outcome = Return("ghost", 32, 0);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_FALSE(store_->Get("ghost")->has_value());
}

TEST_P(RangeStoreContractTest, MalformedReturnIsInvalidArgument) {
  MustAllocate("orders", 32);
  EXPECT_THAT(Return("orders", 32, 33),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Return("orders", 32, -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(StoredMax("orders"), 32);
}

TEST_P(RangeStoreContractTest, RangePastInt64MaxIsOutOfRangeAndChangesNothing) {
  const CollectionState near_end{
      .max = kMax - 10, .return_floor = kMax - 42, .updated_at = clock_.Now()};
  ASSERT_THAT(store_->PutForTesting("orders", near_end), IsOk());
  absl::StatusOr<Range> range = store_->Allocate("orders", 32, 0, NextToken());
  EXPECT_THAT(range,
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("INT64_MAX")));
  EXPECT_EQ(StoredMax("orders"), kMax - 10);
  // The last ten numbers can still be handed out, exactly.
  EXPECT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  EXPECT_THAT(store_->Allocate("orders", 1, 0, NextToken()),
              StatusIs(absl::StatusCode::kOutOfRange));
}

TEST_P(RangeStoreContractTest, ReturnAtInt64MaxSealsTheTopOfTheRange) {
  ASSERT_THAT(store_->PutForTesting("orders", {.max = kMax - 10,
                                               .return_floor = kMax - 42,
                                               .updated_at = clock_.Now()}),
              IsOk());
  ASSERT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  // Every number used: nothing to hand back, and nothing may come back later.
  absl::StatusOr<ReturnOutcome> all_used = Return("orders", kMax, kMax);
  ASSERT_THAT(all_used, IsOk());
  EXPECT_TRUE(all_used->applied);
  EXPECT_EQ(all_used->max, kMax);
  absl::StatusOr<ReturnOutcome> later = Return("orders", kMax, kMax - 1);
  ASSERT_THAT(later, IsOk());
  EXPECT_FALSE(later->applied);
  EXPECT_EQ(later->max, kMax);
  absl::StatusOr<std::optional<CollectionState>> row = store_->Get("orders");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->max, kMax);
  EXPECT_EQ((*row)->return_floor, kMax);
  EXPECT_THAT(store_->Allocate("orders", 1, 0, NextToken()),
              StatusIs(absl::StatusCode::kOutOfRange));
}

TEST_P(RangeStoreContractTest, FloorAtInt64MaxRefusesReturnsBelowIt) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->SetFloor("orders", kMax)->raised);
  // No client holds a range ending at INT64_MAX; one claiming to must not
  // reopen the number the floor covers.
  absl::StatusOr<ReturnOutcome> forged = Return("orders", kMax, kMax - 1);
  ASSERT_THAT(forged, IsOk());
  EXPECT_FALSE(forged->applied);
  EXPECT_EQ(StoredMax("orders"), kMax);
  EXPECT_THAT(store_->Allocate("orders", 1, 0, NextToken()),
              StatusIs(absl::StatusCode::kOutOfRange));
}

TEST_P(RangeStoreContractTest, FloorAlsoBoundsReturnsOfEarlierRanges) {
  MustAllocate("orders", 32);  // 1-32, then raised past by the floor
  ASSERT_TRUE(store_->SetFloor("orders", 100)->raised);
  // No range ends at 100 and the token of 1-32 is retired: even a return
  // without a token (as an old client, where the server allows it) may not
  // reach below the floor.
  EXPECT_FALSE(store_->Return("orders", 100, 99, 0)->applied);
  EXPECT_FALSE(Return("orders", 32, 0)->applied);
  EXPECT_TRUE(store_->Return("orders", 100, 100, 0)->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{101, 132}));
}

// The floor bounds returns whatever Max was: an operator who declares
// 1-50 taken while 33-64 is still out must not see 41-50 issued again.
TEST_P(RangeStoreContractTest, FloorBelowMaxBoundsLaterReturns) {
  MustAllocate("orders", 32);  // 1-32
  ASSERT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  absl::StatusOr<FloorOutcome> floor = store_->SetFloor("orders", 50);
  ASSERT_THAT(floor, IsOk());
  EXPECT_FALSE(floor->raised);
  EXPECT_EQ(floor->max, 64);
  EXPECT_EQ(MustGet("orders").return_floor, 50);
  absl::StatusOr<ReturnOutcome> below = Return("orders", 64, 40);
  ASSERT_THAT(below, IsOk());
  EXPECT_FALSE(below->applied);
  EXPECT_EQ(below->max, 64);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{65, 96}));
}

TEST_P(RangeStoreContractTest, FloorBelowMaxStillLetsTheHolderReturnAboveIt) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_THAT(store_->SetFloor("orders", 50), IsOk());
  absl::StatusOr<ReturnOutcome> above = Return("orders", 64, 50);
  ASSERT_THAT(above, IsOk());
  EXPECT_TRUE(above->applied);
  EXPECT_EQ(above->max, 50);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{51, 82}));
}

TEST_P(RangeStoreContractTest, FloorAtMaxRefusesAWholeReturn) {
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<FloorOutcome> floor = store_->SetFloor("orders", 32);
  ASSERT_THAT(floor, IsOk());
  EXPECT_FALSE(floor->raised);
  EXPECT_EQ(floor->max, 32);
  absl::StatusOr<ReturnOutcome> whole = Return("orders", 32, 0);
  ASSERT_THAT(whole, IsOk());
  EXPECT_FALSE(whole->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_P(RangeStoreContractTest, FloorAboveMaxRetiresTheOutstandingToken) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->SetFloor("orders", 100)->raised);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 100);
  EXPECT_EQ(row.return_floor, 100);
  EXPECT_EQ(row.range_token, 0u);
  EXPECT_EQ(row.previous_token, 0u);
}

TEST_P(RangeStoreContractTest, ReturnWithAnotherTokenIsRefused) {
  MustAllocate("orders", 32);
  const CollectionState before = MustGet("orders");
  for (uint64_t guess : {uint64_t{1}, TokenOf("orders", 32) + 1,
                         TokenOf("orders", 32) ^ (uint64_t{1} << 63)}) {
    absl::StatusOr<ReturnOutcome> outcome =
        store_->Return("orders", 32, 0, guess);
    ASSERT_THAT(outcome, IsOk());
    EXPECT_FALSE(outcome->applied) << guess;
    EXPECT_EQ(outcome->max, 32);
  }
  EXPECT_EQ(MustGet("orders").range_token, before.range_token);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_P(RangeStoreContractTest, SameReturnTwiceAppliesOnce) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 10)->applied);
  // A retry of the same return, after the first was applied.
  absl::StatusOr<ReturnOutcome> again = Return("orders", 32, 10);
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->max, 10);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 10);
  EXPECT_EQ(row.return_floor, 10);
  EXPECT_EQ(row.range_token, 0u);
}

// The case the token exists for: without it, a late copy of a whole return
// matches a range of the same size issued again, and its numbers come back.
TEST_P(RangeStoreContractTest, StaleCopyOfAReturnAfterReissueIsRefused) {
  MustAllocate("orders", 32);
  const uint64_t first = TokenOf("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 0)->applied);          // Max 0
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));  // a new holder
  absl::StatusOr<ReturnOutcome> stale = store_->Return("orders", 32, 0, first);
  ASSERT_THAT(stale, IsOk());
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->max, 32);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

// A client holding its current range and the next one, fetched ahead,
// hands back the later one whole and then its unused tail of the first.
TEST_P(RangeStoreContractTest, WholeReturnOfAdjacentRangeRestoresThePrevious) {
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  ASSERT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  absl::StatusOr<ReturnOutcome> later = Return("orders", 64, 32);
  ASSERT_THAT(later, IsOk());
  EXPECT_TRUE(later->applied);
  EXPECT_EQ(later->max, 32);
  CollectionState row = MustGet("orders");
  EXPECT_EQ(row.return_floor, 0);
  EXPECT_EQ(row.range_token, RangeTokenDigest(TokenOf("orders", 32)));
  EXPECT_EQ(row.previous_token, 0u);
  absl::StatusOr<ReturnOutcome> tail = Return("orders", 32, 5);
  ASSERT_THAT(tail, IsOk());
  EXPECT_TRUE(tail->applied);
  EXPECT_EQ(tail->max, 5);
  // Each applies once.
  EXPECT_FALSE(Return("orders", 32, 5)->applied);
  EXPECT_FALSE(store_->Return("orders", 5, 5, TokenOf("orders", 64))->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{6, 37}));
}

TEST_P(RangeStoreContractTest, PartialReturnOfTheLaterRangeRestoresNothing) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_TRUE(Return("orders", 64, 40)->applied);
  absl::StatusOr<ReturnOutcome> earlier = Return("orders", 32, 5);
  ASSERT_THAT(earlier, IsOk());
  EXPECT_FALSE(earlier->applied);
  EXPECT_EQ(earlier->max, 40);
}

TEST_P(RangeStoreContractTest, RangeAboveAGapHasNoPreviousToRestore) {
  MustAllocate("orders", 32);                                     // 1-32
  ASSERT_EQ(MustAllocate("orders", 32, 100), (Range{101, 132}));  // last_max
  EXPECT_EQ(MustGet("orders").previous_token, 0u);
  ASSERT_TRUE(Return("orders", 132, 100)->applied);
  absl::StatusOr<ReturnOutcome> earlier = Return("orders", 32, 5);
  ASSERT_THAT(earlier, IsOk());
  EXPECT_FALSE(earlier->applied);
  EXPECT_EQ(earlier->max, 100);
}

TEST_P(RangeStoreContractTest, FloorAlsoBoundsTheRangeAWholeReturnRestores) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_FALSE(store_->SetFloor("orders", 20)->raised);
  ASSERT_TRUE(Return("orders", 64, 32)->applied);
  EXPECT_EQ(MustGet("orders").return_floor, 20);
  EXPECT_FALSE(Return("orders", 32, 10)->applied);
  absl::StatusOr<ReturnOutcome> above = Return("orders", 32, 25);
  ASSERT_THAT(above, IsOk());
  EXPECT_TRUE(above->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{26, 57}));
}

TEST_P(RangeStoreContractTest, ReturnWithoutTokenFollowsMaxAndFloorAndRetires) {
  MustAllocate("orders", 32);
  absl::StatusOr<ReturnOutcome> legacy = store_->Return("orders", 32, 10, 0);
  ASSERT_THAT(legacy, IsOk());
  EXPECT_TRUE(legacy->applied);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 10);
  EXPECT_EQ(row.return_floor, 10);
  EXPECT_EQ(row.range_token, 0u);
  EXPECT_FALSE(store_->Return("orders", 10, 0, 0)->applied);
}

TEST_P(RangeStoreContractTest, AllocateWithoutTokenIsInvalidArgument) {
  absl::StatusOr<Range> range = store_->Allocate("orders", 32, 0, 0);
  EXPECT_THAT(range,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token")));
  EXPECT_FALSE(store_->Get("orders")->has_value());
}

TEST_P(RangeStoreContractTest, TokensSurviveARestart) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  Reopen();
  ASSERT_TRUE(Return("orders", 64, 32)->applied);
  ASSERT_TRUE(Return("orders", 32, 7)->applied);
  Reopen();
  EXPECT_EQ(MustAllocate("orders", 32), (Range{8, 39}));
}

TEST_P(RangeStoreContractTest, FloorNearInt64MaxIsOutOfRange) {
  EXPECT_THAT(store_->Allocate("orders", 32, kMax - 5, NextToken()),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_FALSE(store_->Get("orders")->has_value());
}

TEST_P(RangeStoreContractTest, FloorUpToTheJumpAboveMaxIsTaken) {
  MustAllocate("orders", 32);
  EXPECT_EQ(store_->Allocate("orders", 32, 32 + 99, NextToken(), 100).value(),
            (Range{132, 163}));
  EXPECT_EQ(store_->Allocate("orders", 32, 163 + 100, NextToken(), 100).value(),
            (Range{264, 295}));
  // A floor at or below Max never counts as a jump.
  EXPECT_EQ(store_->Allocate("orders", 32, 5, NextToken(), 0).value(),
            (Range{296, 327}));
}

TEST_P(RangeStoreContractTest, FloorBeyondTheJumpIsRefusedAndChangesNothing) {
  MustAllocate("orders", 32);
  absl::StatusOr<Range> refused =
      store_->Allocate("orders", 32, 32 + 101, NextToken(), 100);
  EXPECT_THAT(refused,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("collection \"orders\": last_max 133 is 101 "
                                 "above Max 32")));
  EXPECT_TRUE(IsGuardRailRefusal(refused.status())) << refused.status();
  EXPECT_EQ(store_->Get("orders")->value().max, 32);
  // A collection without a row has Max 0.
  EXPECT_THAT(store_->Allocate("new", 1, 101, NextToken(), 100),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(store_->Get("new")->has_value());
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_P(RangeStoreContractTest, JumpIsJudgedAgainstTheMaxEarlierOperationsLeft) {
  MustAllocate("orders", 32);
  // Queued together: the second's floor is 132 above the Max it was sent
  // against (32), but 100 above the Max the first leaves (64).
  testing_util::Notification first_done, second_done;
  absl::StatusOr<Allocation> first, second;
  store_->AllocateAsync("orders", 32, 0, NextToken(), 100,
                        [&](absl::StatusOr<Allocation> a) {
                          first = std::move(a);
                          first_done.Notify();
                        });
  store_->AllocateAsync("orders", 32, 164, NextToken(), 100,
                        [&](absl::StatusOr<Allocation> a) {
                          second = std::move(a);
                          second_done.Notify();
                        });
  first_done.WaitForNotification();
  second_done.WaitForNotification();
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(first->range, (Range{33, 64}));
  EXPECT_EQ(second->range, (Range{165, 196}));
}

// AllocateExistingAsync (a call over the collection limit): a collection
// with a row is served as AllocateAsync serves it; a new name is
// NOT_FOUND (IsNoRowRefusal) and gets no row, even queued with an
// allocation of an existing one.
TEST_P(RangeStoreContractTest, AllocateExistingRefusesANameWithoutARow) {
  MustAllocate("orders", 32);
  testing_util::Notification existing_done, new_done;
  absl::StatusOr<Allocation> existing, fresh;
  store_->AllocateExistingAsync("orders", 32, 0, NextToken(), kNoFloorJumpLimit,
                                [&](absl::StatusOr<Allocation> a) {
                                  existing = std::move(a);
                                  existing_done.Notify();
                                });
  store_->AllocateExistingAsync("fresh", 32, 0, NextToken(), kNoFloorJumpLimit,
                                [&](absl::StatusOr<Allocation> a) {
                                  fresh = std::move(a);
                                  new_done.Notify();
                                });
  existing_done.WaitForNotification();
  new_done.WaitForNotification();
  ASSERT_THAT(existing, IsOk());
  EXPECT_EQ(existing->range, (Range{33, 64}));
  EXPECT_FALSE(existing->created);
  EXPECT_THAT(fresh, StatusIs(absl::StatusCode::kNotFound,
                              HasSubstr("collection \"fresh\" has no row")));
  EXPECT_TRUE(IsNoRowRefusal(fresh.status()));
  EXPECT_FALSE(store_->Get("fresh")->has_value());
  EXPECT_EQ(store_->collection_count(), 1);
  EXPECT_EQ(MustAllocate("fresh", 32), (Range{1, 32}));
}

// Queued one after another (in one batch or several), AllocateExistingAsync
// sees what the operations queued before it did: a row an allocation just
// created is served above it, and a refusal leaves the name to an
// allocation queued after it.
TEST_P(RangeStoreContractTest,
       AllocateExistingSeesEarlierOperationsInItsBatch) {
  MustAllocate("warm", 32);
  std::vector<absl::StatusOr<Allocation>> got(4);
  testing_util::Notification done[4];
  auto into = [&](int i) {
    return [&, i](absl::StatusOr<Allocation> a) {
      got[i] = std::move(a);
      done[i].Notify();
    };
  };
  store_->AllocateAsync("x", 32, 0, NextToken(), kNoFloorJumpLimit, into(0));
  store_->AllocateExistingAsync("x", 32, 0, NextToken(), kNoFloorJumpLimit,
                                into(1));
  store_->AllocateExistingAsync("y", 32, 0, NextToken(), kNoFloorJumpLimit,
                                into(2));
  store_->AllocateAsync("y", 32, 0, NextToken(), kNoFloorJumpLimit, into(3));
  for (auto& d : done) d.WaitForNotification();
  ASSERT_THAT(got[0], IsOk());
  ASSERT_THAT(got[1], IsOk());
  EXPECT_EQ(got[0]->range, (Range{1, 32}));
  EXPECT_EQ(got[1]->range, (Range{33, 64}));
  EXPECT_TRUE(IsNoRowRefusal(got[2].status())) << got[2].status();
  ASSERT_THAT(got[3], IsOk());
  EXPECT_EQ(got[3]->range, (Range{1, 32}));
  EXPECT_TRUE(got[3]->created);
}

TEST_P(RangeStoreContractTest, DeleteOfUnusedCollectionRemovesTheRow) {
  ASSERT_THAT(store_->SetFloor("typo", 0), IsOk());
  MustAllocate("orders", 32);
  ASSERT_EQ(store_->collection_count(), 2);
  absl::StatusOr<CollectionState> deleted = store_->Delete("typo");
  ASSERT_THAT(deleted, IsOk());
  EXPECT_EQ(deleted->max, 0);
  EXPECT_FALSE(store_->Get("typo")->has_value());
  EXPECT_EQ(store_->collection_count(), 1);
  // As if it had never been: the next range starts at 1.
  EXPECT_EQ(MustAllocate("typo", 32), (Range{1, 32}));
  EXPECT_EQ(store_->collection_count(), 2);
}

TEST_P(RangeStoreContractTest, DeleteAfterNextRangeIsRefusedAndKeepsTheRow) {
  MustAllocate("orders", 32);
  const CollectionState before = MustGet("orders");
  EXPECT_THAT(store_->Delete("orders"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("\"orders\""), HasSubstr("Max 32"))));
  const CollectionState after = MustGet("orders");
  EXPECT_EQ(after.max, before.max);
  EXPECT_EQ(after.return_floor, before.return_floor);
  EXPECT_EQ(after.range_token, before.range_token);
  EXPECT_EQ(after.updated_at, before.updated_at);
  EXPECT_EQ(store_->collection_count(), 1);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_P(RangeStoreContractTest, DeleteAfterAPartialReturnIsRefused) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 1)->applied);  // 1 was used
  EXPECT_THAT(
      store_->Delete("orders"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Max 1")));
  EXPECT_EQ(MustAllocate("orders", 32), (Range{2, 33}));
}

TEST_P(RangeStoreContractTest, DeleteAfterEveryRangeCameBackWholeIsAllowed) {
  // Two adjacent ranges, both returned whole: Max is back at 0 and no
  // token is left, so no number of the collection is held by anyone.
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 64, 32)->applied);
  ASSERT_TRUE(Return("orders", 32, 0)->applied);
  const CollectionState row = MustGet("orders");
  ASSERT_EQ(row.max, 0);
  ASSERT_EQ(row.return_floor, 0);
  ASSERT_THAT(store_->Delete("orders"), IsOk());
  EXPECT_FALSE(store_->Get("orders")->has_value());
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
}

TEST_P(RangeStoreContractTest, DeleteAfterAFloorIsRefused) {
  ASSERT_THAT(store_->SetFloor("imported", 500), IsOk());
  EXPECT_THAT(
      store_->Delete("imported"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Max 500")));
  EXPECT_EQ(MustAllocate("imported", 32), (Range{501, 532}));
}

TEST_P(RangeStoreContractTest, DeleteOfAStateWithOnlyATokenLeftIsRefused) {
  // Max and floor 0, but a range token still stored: not a row that was
  // never used, so it stays.
  ASSERT_THAT(
      store_->PutForTesting("odd", CollectionState{.max = 0,
                                                   .range_token = 7,
                                                   .updated_at = clock_.Now()}),
      IsOk());
  EXPECT_THAT(store_->Delete("odd"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(store_->Get("odd")->has_value());
}

TEST_P(RangeStoreContractTest, DeleteOfUnknownCollectionIsNotFound) {
  EXPECT_THAT(store_->Delete("none"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"none\"")));
  EXPECT_EQ(store_->collection_count(), 0);
}

TEST_P(RangeStoreContractTest, DeleteQueuedAfterANextRangeSeesItAndRefuses) {
  ASSERT_THAT(store_->SetFloor("orders", 0), IsOk());
  // Queued together: the allocation comes first, so the delete must find
  // Max 32 and keep the row.
  testing_util::Notification allocated, deleted;
  absl::StatusOr<Allocation> allocation;
  absl::StatusOr<CollectionState> deletion;
  store_->AllocateAsync("orders", 32, 0, NextToken(), kNoFloorJumpLimit,
                        [&](absl::StatusOr<Allocation> a) {
                          allocation = std::move(a);
                          allocated.Notify();
                        });
  store_->DeleteAsync("orders", [&](absl::StatusOr<CollectionState> d) {
    deletion = std::move(d);
    deleted.Notify();
  });
  allocated.WaitForNotification();
  deleted.WaitForNotification();
  ASSERT_THAT(allocation, IsOk());
  EXPECT_EQ(allocation->range, (Range{1, 32}));
  EXPECT_THAT(deletion, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("Max 32")));
  EXPECT_EQ(StoredMax("orders"), 32);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_P(RangeStoreContractTest, DeleteSurvivesARestart) {
  ASSERT_THAT(store_->SetFloor("typo", 0), IsOk());
  ASSERT_THAT(store_->Delete("typo"), IsOk());
  Reopen();
  EXPECT_FALSE(store_->Get("typo")->has_value());
  EXPECT_EQ(store_->collection_count(), 0);
}

// Retirement: the row goes whatever it holds, and the name's numbers never
// repeat (range_store.h, RetireAsync).
TEST_P(RangeStoreContractTest, RetireRemovesTheRowAndANewRowStartsAboveIt) {
  MustAllocate("flood-1", 32);
  MustAllocate("flood-1", 64);
  MustAllocate("kept", 8);
  ASSERT_EQ(store_->collection_count(), 2);
  absl::StatusOr<CollectionState> retired = store_->Retire("flood-1");
  ASSERT_THAT(retired, IsOk());
  EXPECT_EQ(retired->max, 96);
  EXPECT_FALSE(store_->Get("flood-1")->has_value());
  EXPECT_EQ(store_->collection_count(), 1);
  absl::StatusOr<std::vector<NamedCollectionState>> listed =
      store_->List("", 10);
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "kept");
  // A new row of the name, counted as created, above all it handed out.
  absl::StatusOr<Allocation> again = base::Await<absl::StatusOr<Allocation>>(
      [&](StoreCallback<Allocation> done) {
        store_->AllocateAsync("flood-1", 32, 0, NextToken(), kNoFloorJumpLimit,
                              std::move(done));
      });
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->range, (Range{97, 128}));
  EXPECT_TRUE(again->created);
  EXPECT_EQ(store_->collection_count(), 2);
}

TEST_P(RangeStoreContractTest, ReturnsOfARetiredCollectionNeverLowerAnything) {
  MustAllocate("orders", 32);  // [1, 32] stays out with its holder
  ASSERT_THAT(store_->Retire("orders"), IsOk());
  // The holder hands its tail back after the retirement: refused, and no
  // row appears.
  absl::StatusOr<ReturnOutcome> late = Return("orders", 32, 4);
  ASSERT_THAT(late, IsOk());
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->max, 0);
  EXPECT_FALSE(store_->Get("orders")->has_value());
  EXPECT_EQ(store_->collection_count(), 0);
  // Nor after the name is used again: the new row knows no old token.
  EXPECT_EQ(MustAllocate("orders", 16), (Range{33, 48}));
  late = Return("orders", 32, 4);
  ASSERT_THAT(late, IsOk());
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->max, 48);
  EXPECT_EQ(MustAllocate("orders", 16), (Range{49, 64}));
}

TEST_P(RangeStoreContractTest, RetiringAgainKeepsTheHigherMaxAndFloors) {
  ASSERT_THAT(store_->SetFloor("imported", 500), IsOk());
  EXPECT_EQ(store_->Retire("imported")->max, 500);
  // SetFloor below the retired Max creates the row there, raising nothing.
  absl::StatusOr<FloorOutcome> floor = store_->SetFloor("imported", 10);
  ASSERT_THAT(floor, IsOk());
  EXPECT_FALSE(floor->raised);
  EXPECT_EQ(floor->max, 500);
  EXPECT_EQ(MustAllocate("imported", 32), (Range{501, 532}));
  EXPECT_EQ(store_->Retire("imported")->max, 532);
  EXPECT_EQ(MustAllocate("imported", 32), (Range{533, 564}));
}

TEST_P(RangeStoreContractTest, RetireOfUnknownCollectionIsNotFound) {
  EXPECT_THAT(store_->Retire("none"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"none\"")));
  EXPECT_EQ(store_->collection_count(), 0);
  EXPECT_EQ(MustAllocate("none", 32), (Range{1, 32}));
}

TEST_P(RangeStoreContractTest, NextRangeQueuedRightAfterARetireStartsAbove) {
  MustAllocate("orders", 32);
  // Queued together, so most likely judged in one batch: the retirement
  // first, then a new row of the name.
  testing_util::Notification retired_done, allocated;
  absl::StatusOr<CollectionState> retired;
  absl::StatusOr<Allocation> allocation;
  store_->RetireAsync("orders", [&](absl::StatusOr<CollectionState> r) {
    retired = std::move(r);
    retired_done.Notify();
  });
  store_->AllocateAsync("orders", 8, 0, NextToken(), kNoFloorJumpLimit,
                        [&](absl::StatusOr<Allocation> a) {
                          allocation = std::move(a);
                          allocated.Notify();
                        });
  retired_done.WaitForNotification();
  allocated.WaitForNotification();
  ASSERT_THAT(retired, IsOk());
  EXPECT_EQ(retired->max, 32);
  ASSERT_THAT(allocation, IsOk());
  EXPECT_EQ(allocation->range, (Range{33, 40}));
  EXPECT_TRUE(allocation->created);
  // Retired again at 40, after a restart too.
  EXPECT_EQ(store_->Retire("orders")->max, 40);
  Reopen();
  EXPECT_FALSE(store_->Get("orders")->has_value());
  EXPECT_EQ(store_->collection_count(), 0);
  EXPECT_EQ(MustAllocate("orders", 8), (Range{41, 48}));
}

// A retired name's new row starts at its retired Max, so the guard rail
// measures a floor's jump from there, not from 0 (on PostgreSQL: the
// creation takes its lock although it would be refused on no row).
TEST_P(RangeStoreContractTest, RetiredNamesFloorJumpIsMeasuredFromItsMax) {
  MustAllocate("orders", 200);
  ASSERT_THAT(store_->Retire("orders"), IsOk());
  // 250 is 250 above 0, but 50 above the retired Max.
  EXPECT_EQ(store_->Allocate("orders", 32, 250, NextToken(), 100).value(),
            (Range{251, 282}));
  EXPECT_EQ(store_->collection_count(), 1);
  ASSERT_THAT(store_->Retire("orders"), IsOk());
  // 101 above the retired Max is still refused, and creates nothing.
  EXPECT_THAT(store_->Allocate("orders", 32, 383, NextToken(), 100),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("101 above Max 282")));
  EXPECT_FALSE(store_->Get("orders")->has_value());
  EXPECT_EQ(store_->collection_count(), 0);
  EXPECT_EQ(store_->Allocate("orders", 32, 382, NextToken(), 100).value(),
            (Range{383, 414}));
}

TEST_P(RangeStoreContractTest, RestartContinuesAboveEveryIssuedRange) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 64);
  Reopen();
  EXPECT_EQ(StoredMax("orders"), 96);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{97, 128}));
}

TEST_P(RangeStoreContractTest, ListLimitBelowOneIsInvalidArgument) {
  MustAllocate("orders", 32);
  for (int limit : {0, -1}) {
    absl::StatusOr<std::vector<NamedCollectionState>> rows =
        store_->List("", limit);
    EXPECT_THAT(rows, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("list limit")));
  }
  EXPECT_EQ(store_->List("", 1)->size(), 1u);
}

TEST_P(RangeStoreContractTest, ConcurrentAllocationsNeverOverlap) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::vector<Range>> got(kThreads * 2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int c = i % 2;
        absl::StatusOr<Range> r = store_->Allocate(
            c == 0 ? "even" : "odd", 1 + (t + i) % 40, 0, NextToken());
        ASSERT_THAT(r, IsOk());
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

}  // namespace
}  // namespace hilo
