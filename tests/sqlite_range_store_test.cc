#include "service/sqlite_range_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
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
constexpr uint64_t kNeverIssued = 0xdeadbeefcafef00d;

// Tokens for tests: distinct and non-zero. The store requires nothing more
// of them; the service draws real ones from the kernel.
uint64_t NextToken() {
  static std::atomic<uint64_t> next{0x1000};
  return next.fetch_add(1);
}

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

  // Allocates with a fresh token and remembers it, for Return.
  Range MustAllocate(absl::string_view collection, int64_t size,
                     int64_t floor = 0) {
    const uint64_t token = NextToken();
    absl::StatusOr<Range> range =
        store_->Allocate(collection, size, floor, token);
    EXPECT_TRUE(range.ok()) << range.status();
    if (range.ok()) tokens_[{std::string(collection), range->high}] = token;
    return range.value_or(Range{});
  }

  // The token MustAllocate got for the range of `collection` ending at
  // `end` (the latest such range), or one never issued.
  uint64_t TokenOf(absl::string_view collection, int64_t end) {
    auto it = tokens_.find({std::string(collection), end});
    return it == tokens_.end() ? kNeverIssued : it->second;
  }

  // A return by the holder of the range ending at `end`.
  absl::StatusOr<ReturnOutcome> Return(absl::string_view collection,
                                       int64_t end, int64_t last) {
    return store_->Return(collection, end, last, TokenOf(collection, end));
  }

  CollectionState MustGet(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> state =
        store_->Get(collection);
    EXPECT_TRUE(state.ok() && state->has_value()) << state.status();
    return state.ok() ? state->value_or(CollectionState{}) : CollectionState{};
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
  std::map<std::pair<std::string, int64_t>, uint64_t> tokens_;
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
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 1);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{2, 33}));
}

TEST_F(SqliteRangeStoreTest, ReturnOfWholeRangeIsApplied) {
  MustAllocate("orders", 32);
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 0);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
}

TEST_F(SqliteRangeStoreTest, StaleReturnIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // another client took 33-64
  absl::StatusOr<ReturnOutcome> outcome = Return("orders", 32, 5);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 64);
  EXPECT_EQ(StoredMax("orders"), 64);
}

TEST_F(SqliteRangeStoreTest, ReturnBelowLastIssuedLowIsRefused) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  absl::StatusOr<ReturnOutcome> below = Return("orders", 64, 10);
  ASSERT_TRUE(below.ok());
  EXPECT_FALSE(below->applied);
  EXPECT_EQ(below->max, 64);
  absl::StatusOr<ReturnOutcome> edge = Return("orders", 64, 32);
  ASSERT_TRUE(edge.ok());
  EXPECT_TRUE(edge->applied);
  EXPECT_EQ(edge->max, 32);
}

TEST_F(SqliteRangeStoreTest, SecondReturnCannotMoveMaxLower) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 10)->applied);
  absl::StatusOr<ReturnOutcome> again = Return("orders", 10, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->max, 10);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{11, 42}));
}

TEST_F(SqliteRangeStoreTest, ReturnOnUnknownCollectionCreatesNothing) {
  absl::StatusOr<ReturnOutcome> outcome = Return("ghost", 32, 0);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->applied);
  EXPECT_EQ(outcome->max, 0);
  EXPECT_FALSE(store_->Get("ghost")->has_value());
}

TEST_F(SqliteRangeStoreTest, MalformedReturnIsInvalidArgument) {
  MustAllocate("orders", 32);
  EXPECT_EQ(Return("orders", 32, 33).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Return("orders", 32, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StoredMax("orders"), 32);
}

TEST_F(SqliteRangeStoreTest, RangePastInt64MaxIsOutOfRangeAndChangesNothing) {
  const CollectionState near_end{
      .max = kMax - 10, .return_floor = kMax - 42, .updated_at = clock_.Now()};
  ASSERT_TRUE(store_->PutForTesting("orders", near_end).ok());
  absl::StatusOr<Range> range = store_->Allocate("orders", 32, 0, NextToken());
  EXPECT_EQ(range.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(range.status().message(), HasSubstr("INT64_MAX"));
  EXPECT_EQ(StoredMax("orders"), kMax - 10);
  // The last ten numbers can still be handed out, exactly.
  EXPECT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  EXPECT_EQ(store_->Allocate("orders", 1, 0, NextToken()).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, ReturnAtInt64MaxSealsTheTopOfTheRange) {
  ASSERT_TRUE(store_
                  ->PutForTesting("orders", {.max = kMax - 10,
                                             .return_floor = kMax - 42,
                                             .updated_at = clock_.Now()})
                  .ok());
  ASSERT_EQ(MustAllocate("orders", 10), (Range{kMax - 9, kMax}));
  // Every number used: nothing to hand back, and nothing may come back later.
  absl::StatusOr<ReturnOutcome> all_used = Return("orders", kMax, kMax);
  ASSERT_TRUE(all_used.ok()) << all_used.status();
  EXPECT_TRUE(all_used->applied);
  EXPECT_EQ(all_used->max, kMax);
  absl::StatusOr<ReturnOutcome> later = Return("orders", kMax, kMax - 1);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(later->applied);
  EXPECT_EQ(later->max, kMax);
  absl::StatusOr<std::optional<CollectionState>> row = store_->Get("orders");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->max, kMax);
  EXPECT_EQ((*row)->return_floor, kMax);
  EXPECT_EQ(store_->Allocate("orders", 1, 0, NextToken()).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, FloorAtInt64MaxRefusesReturnsBelowIt) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->SetFloor("orders", kMax)->raised);
  // No client holds a range ending at INT64_MAX; one claiming to must not
  // reopen the number the floor covers.
  absl::StatusOr<ReturnOutcome> forged = Return("orders", kMax, kMax - 1);
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(forged->applied);
  EXPECT_EQ(StoredMax("orders"), kMax);
  EXPECT_EQ(store_->Allocate("orders", 1, 0, NextToken()).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SqliteRangeStoreTest, FloorAlsoBoundsReturnsOfEarlierRanges) {
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
TEST_F(SqliteRangeStoreTest, FloorBelowMaxBoundsLaterReturns) {
  MustAllocate("orders", 32);  // 1-32
  ASSERT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  absl::StatusOr<FloorOutcome> floor = store_->SetFloor("orders", 50);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_FALSE(floor->raised);
  EXPECT_EQ(floor->max, 64);
  EXPECT_EQ(MustGet("orders").return_floor, 50);
  absl::StatusOr<ReturnOutcome> below = Return("orders", 64, 40);
  ASSERT_TRUE(below.ok()) << below.status();
  EXPECT_FALSE(below->applied);
  EXPECT_EQ(below->max, 64);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{65, 96}));
}

TEST_F(SqliteRangeStoreTest, FloorBelowMaxStillLetsTheHolderReturnAboveIt) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_TRUE(store_->SetFloor("orders", 50).ok());
  absl::StatusOr<ReturnOutcome> above = Return("orders", 64, 50);
  ASSERT_TRUE(above.ok()) << above.status();
  EXPECT_TRUE(above->applied);
  EXPECT_EQ(above->max, 50);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{51, 82}));
}

TEST_F(SqliteRangeStoreTest, FloorAtMaxRefusesAWholeReturn) {
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  absl::StatusOr<FloorOutcome> floor = store_->SetFloor("orders", 32);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_FALSE(floor->raised);
  EXPECT_EQ(floor->max, 32);
  absl::StatusOr<ReturnOutcome> whole = Return("orders", 32, 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(whole->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_F(SqliteRangeStoreTest, FloorAboveMaxRetiresTheOutstandingToken) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(store_->SetFloor("orders", 100)->raised);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 100);
  EXPECT_EQ(row.return_floor, 100);
  EXPECT_EQ(row.range_token, 0u);
  EXPECT_EQ(row.previous_token, 0u);
}

TEST_F(SqliteRangeStoreTest, ReturnWithAnotherTokenIsRefused) {
  MustAllocate("orders", 32);
  const CollectionState before = MustGet("orders");
  for (uint64_t guess : {uint64_t{1}, TokenOf("orders", 32) + 1,
                         TokenOf("orders", 32) ^ (uint64_t{1} << 63)}) {
    absl::StatusOr<ReturnOutcome> outcome =
        store_->Return("orders", 32, 0, guess);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_FALSE(outcome->applied) << guess;
    EXPECT_EQ(outcome->max, 32);
  }
  EXPECT_EQ(MustGet("orders").range_token, before.range_token);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

TEST_F(SqliteRangeStoreTest, SameReturnTwiceAppliesOnce) {
  MustAllocate("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 10)->applied);
  // A retry of the same return, after the first was applied.
  absl::StatusOr<ReturnOutcome> again = Return("orders", 32, 10);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->applied);
  EXPECT_EQ(again->max, 10);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 10);
  EXPECT_EQ(row.return_floor, 10);
  EXPECT_EQ(row.range_token, 0u);
}

// The case the token exists for: without it, a late copy of a whole return
// matches a range of the same size issued again, and its numbers come back.
TEST_F(SqliteRangeStoreTest, StaleCopyOfAReturnAfterReissueIsRefused) {
  MustAllocate("orders", 32);
  const uint64_t first = TokenOf("orders", 32);
  ASSERT_TRUE(Return("orders", 32, 0)->applied);          // Max 0
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));  // a new holder
  absl::StatusOr<ReturnOutcome> stale = store_->Return("orders", 32, 0, first);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->max, 32);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
}

// A client holding its current range and the next one, fetched ahead,
// hands back the later one whole and then its unused tail of the first.
TEST_F(SqliteRangeStoreTest, WholeReturnOfAdjacentRangeRestoresThePrevious) {
  ASSERT_EQ(MustAllocate("orders", 32), (Range{1, 32}));
  ASSERT_EQ(MustAllocate("orders", 32), (Range{33, 64}));
  absl::StatusOr<ReturnOutcome> later = Return("orders", 64, 32);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE(later->applied);
  EXPECT_EQ(later->max, 32);
  CollectionState row = MustGet("orders");
  EXPECT_EQ(row.return_floor, 0);
  EXPECT_EQ(row.range_token, TokenOf("orders", 32));
  EXPECT_EQ(row.previous_token, 0u);
  absl::StatusOr<ReturnOutcome> tail = Return("orders", 32, 5);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_TRUE(tail->applied);
  EXPECT_EQ(tail->max, 5);
  // Each applies once.
  EXPECT_FALSE(Return("orders", 32, 5)->applied);
  EXPECT_FALSE(store_->Return("orders", 5, 5, TokenOf("orders", 64))->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{6, 37}));
}

TEST_F(SqliteRangeStoreTest, PartialReturnOfTheLaterRangeRestoresNothing) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_TRUE(Return("orders", 64, 40)->applied);
  absl::StatusOr<ReturnOutcome> earlier = Return("orders", 32, 5);
  ASSERT_TRUE(earlier.ok());
  EXPECT_FALSE(earlier->applied);
  EXPECT_EQ(earlier->max, 40);
}

TEST_F(SqliteRangeStoreTest, RangeAboveAGapHasNoPreviousToRestore) {
  MustAllocate("orders", 32);                                     // 1-32
  ASSERT_EQ(MustAllocate("orders", 32, 100), (Range{101, 132}));  // last_max
  EXPECT_EQ(MustGet("orders").previous_token, 0u);
  ASSERT_TRUE(Return("orders", 132, 100)->applied);
  absl::StatusOr<ReturnOutcome> earlier = Return("orders", 32, 5);
  ASSERT_TRUE(earlier.ok());
  EXPECT_FALSE(earlier->applied);
  EXPECT_EQ(earlier->max, 100);
}

TEST_F(SqliteRangeStoreTest, FloorAlsoBoundsTheRangeAWholeReturnRestores) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  ASSERT_FALSE(store_->SetFloor("orders", 20)->raised);
  ASSERT_TRUE(Return("orders", 64, 32)->applied);
  EXPECT_EQ(MustGet("orders").return_floor, 20);
  EXPECT_FALSE(Return("orders", 32, 10)->applied);
  absl::StatusOr<ReturnOutcome> above = Return("orders", 32, 25);
  ASSERT_TRUE(above.ok());
  EXPECT_TRUE(above->applied);
  EXPECT_EQ(MustAllocate("orders", 32), (Range{26, 57}));
}

TEST_F(SqliteRangeStoreTest, ReturnWithoutTokenFollowsMaxAndFloorAndRetires) {
  MustAllocate("orders", 32);
  absl::StatusOr<ReturnOutcome> legacy = store_->Return("orders", 32, 10, 0);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_TRUE(legacy->applied);
  const CollectionState row = MustGet("orders");
  EXPECT_EQ(row.max, 10);
  EXPECT_EQ(row.return_floor, 10);
  EXPECT_EQ(row.range_token, 0u);
  EXPECT_FALSE(store_->Return("orders", 10, 0, 0)->applied);
}

TEST_F(SqliteRangeStoreTest, AllocateWithoutTokenIsInvalidArgument) {
  absl::StatusOr<Range> range = store_->Allocate("orders", 32, 0, 0);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(range.status().message(), HasSubstr("token"));
  EXPECT_FALSE(store_->Get("orders")->has_value());
}

TEST_F(SqliteRangeStoreTest, TokensSurviveARestart) {
  MustAllocate("orders", 32);
  MustAllocate("orders", 32);  // 33-64
  Reopen();
  ASSERT_TRUE(Return("orders", 64, 32)->applied);
  ASSERT_TRUE(Return("orders", 32, 7)->applied);
  Reopen();
  EXPECT_EQ(MustAllocate("orders", 32), (Range{8, 39}));
}

TEST_F(SqliteRangeStoreTest, FloorNearInt64MaxIsOutOfRange) {
  EXPECT_EQ(
      store_->Allocate("orders", 32, kMax - 5, NextToken()).status().code(),
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
      store_
          ->PutForTesting("full", CollectionState{.max = kMax - 5,
                                                  .return_floor = 1,
                                                  .updated_at = clock_.Now()})
          .ok());
  const int64_t commits_before = store_->commits();

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
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("q", 1, 0, NextToken()); });
  for (int i = 0; i < kQueued; ++i) {
    Queue(threads,
          [&, i] { queued[i] = store_->Allocate("q", 1, 0, NextToken()); });
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
      gate, threads,
      [&] { r.first = store_->Allocate("a", 32, 0, NextToken()); },
      absl::ResourceExhaustedError("disk is full (injected)"));
  Queue(threads,
        [&] { r.write = store_->Allocate("orders", 32, 0, NextToken()); });
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
                  [&] { r.first = store_->Allocate("a", 32, 0, NextToken()); });
  Queue(threads,
        [&] { r.write = store_->Allocate("orders", 32, 0, NextToken()); });
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

// If an operation's savepoint cannot be released, whether its writes are
// still in the transaction is unknown: nothing of its batch may commit, and
// no operation of it may report success.
TEST_F(SqliteRangeStoreTest, FailedReleaseFailsTheWholeBatch) {
  CommitGate gate;
  std::atomic<int> releases{0};
  SqliteRangeStoreOptions options;
  options.path = dir_.File("hilo.db");
  options.clock = &clock_;
  options.before_commit_for_testing = gate.Hook();
  options.before_release_for_testing = [&]() -> absl::Status {
    // The second operation of the second batch cannot be released.
    if (releases.fetch_add(1) == 2) {
      return absl::InternalError("RELEASE failed (injected)");
    }
    return absl::OkStatus();
  };
  store_.reset();
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> opened =
      SqliteRangeStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store_ = *std::move(opened);

  absl::StatusOr<Range> first, a, b, c;
  std::vector<std::thread> threads;
  HoldFirstCommit(gate, threads,
                  [&] { first = store_->Allocate("x", 32, 0, NextToken()); });
  Queue(threads, [&] { a = store_->Allocate("a", 32, 0, NextToken()); });
  Queue(threads, [&] { b = store_->Allocate("b", 32, 0, NextToken()); });
  Queue(threads, [&] { c = store_->Allocate("c", 32, 0, NextToken()); });
  gate.Release();
  for (std::thread& t : threads) t.join();

  ASSERT_TRUE(first.ok()) << first.status();
  for (const absl::StatusOr<Range>* r : {&a, &b, &c}) {
    EXPECT_EQ(r->status().code(), absl::StatusCode::kInternal) << r->status();
    EXPECT_THAT(r->status().message(), HasSubstr("RELEASE failed"));
  }
  Reopen();
  EXPECT_TRUE(store_->Get("x")->has_value());
  for (const char* name : {"a", "b", "c"}) {
    EXPECT_FALSE(store_->Get(name)->has_value()) << name;
  }
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
        absl::StatusOr<Range> r = store_->Allocate(
            c == 0 ? "even" : "odd", 1 + (t + i) % 40, 0, NextToken());
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
  for (int open = 0; open < 2; ++open) {  // the second open finds version 3
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
  EXPECT_TRUE((*store)->Return("issued", 64, 32, /*token=*/0)->applied);
  EXPECT_FALSE(
      (*store)->Return("wrapped", kMax, kMax - 1, /*token=*/0)->applied);
  store->reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(options.path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 3);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(SqliteRangeStoreOpenTest, SchemaTwoGainsTokensThatNoReturnCanMatch) {
  TempDir dir;
  const std::string path = dir.File("v2.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, R"sql(
    CREATE TABLE collections (
      name TEXT NOT NULL PRIMARY KEY, max INTEGER NOT NULL,
      return_floor INTEGER NOT NULL, updated_at_us INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO collections VALUES ('orders', 64, 32, 1);
    PRAGMA application_id = 1214860399;
    PRAGMA user_version = 2;
  )sql",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
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
              HasSubstr("migrating schema version 1 to 3 (nothing changed)"));
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
  ASSERT_TRUE(store.ok()) << store.status();
  // a's entry lives in the temp dir, b's in a, the file's in b.
  EXPECT_THAT(synced, ::testing::ElementsAre(dir.path(), dir.File("a"),
                                             dir.File("a/b")));
  store->reset();
  synced.clear();
  ASSERT_TRUE(SqliteRangeStore::Open(options).ok());
  EXPECT_THAT(synced, ::testing::IsEmpty());  // nothing new to flush
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
