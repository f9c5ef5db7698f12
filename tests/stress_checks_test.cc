// hilo_stress's end-of-run checks (stress/checks.h, and FindOverlaps of
// stress/range_log.h), from the contract: an ID handed out twice is a
// finding; an ID outside every range its client was given is a finding;
// ranges of one counter that overlap are findings; a stored Max below a
// number the node replied with is a finding. And where the contract holds,
// no finding.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stress/checks.h"
#include "stress/id_ledger.h"
#include "stress/range_log.h"

namespace hilo::stress {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

using LedgerRun = IdLedger::Run;

// A range a client was given and used up to `used_high`.
UsedRange Given(std::string collection, std::string tag, int64_t low,
                int64_t high, int64_t used_high) {
  UsedRange r;
  r.collection = std::move(collection);
  r.node_tag = std::move(tag);
  r.low = low;
  r.high = high;
  r.used_high = used_high;
  r.held_high = high;
  r.token = 1;
  return r;
}

// ------------------------------------------------- handed out twice

TEST(FindIdsHandedToTwoWorkersTest, SameNumberInTwoWorkersIsAFinding) {
  const IdFindings f = FindIdsHandedToTwoWorkers({
      {LedgerRun{"c0", "A", 1, 10}}, {LedgerRun{"c0", "A", 10, 5}},  // 10 again
  });
  EXPECT_EQ(f.numbers, 1);
  ASSERT_THAT(f.problems, SizeIs(1));
  EXPECT_THAT(f.problems[0], HasSubstr("c0"));
}

TEST(FindIdsHandedToTwoWorkersTest, CountsEveryNumberGivenTwice) {
  const IdFindings f = FindIdsHandedToTwoWorkers({
      {LedgerRun{"c0", "A", 1, 100}},
      {LedgerRun{"c0", "A", 51, 100}},  // 51..100 twice
      {LedgerRun{"c0", "A", 300, 1}},
  });
  EXPECT_EQ(f.numbers, 50);
}

TEST(FindIdsHandedToTwoWorkersTest, DisjointOrTouchingRunsAreNoFinding) {
  const IdFindings f = FindIdsHandedToTwoWorkers({
      {LedgerRun{"c0", "A", 1, 10}, LedgerRun{"c0", "A", 21, 10}},
      {LedgerRun{"c0", "A", 11, 10}},
  });
  EXPECT_EQ(f.numbers, 0);
  EXPECT_THAT(f.problems, IsEmpty());
}

TEST(FindIdsHandedToTwoWorkersTest,
     SameNumberOfAnotherCollectionOrCounterIsNoFinding) {
  const IdFindings f = FindIdsHandedToTwoWorkers({
      {LedgerRun{"c0", "A", 1, 10}},
      {LedgerRun{"c1", "A", 1, 10}, LedgerRun{"c0", "B", 1, 10}},
  });
  EXPECT_EQ(f.numbers, 0);
  EXPECT_THAT(f.problems, IsEmpty());
}

TEST(IdLedgerTest, SameNumberTwiceInOneWorkerIsRefused) {
  IdLedger ledger;
  EXPECT_TRUE(ledger.Add("c0", "A", 7));
  EXPECT_TRUE(ledger.Add("c0", "B", 7));
  EXPECT_TRUE(ledger.Add("c1", "A", 7));
  EXPECT_FALSE(ledger.Add("c0", "A", 7));
}

// ----------------------------------------------------- outside ranges

TEST(FindIdsOutsideRangesTest, NumberInNoRangeIsAFinding) {
  const IdFindings f = FindIdsOutsideRanges(
      {LedgerRun{"c0", "A", 1, 10}, LedgerRun{"c0", "A", 50, 1}},
      {Given("c0", "A", 1, 10, 10)});
  EXPECT_EQ(f.numbers, 1);
  ASSERT_THAT(f.problems, SizeIs(1));
  EXPECT_THAT(f.problems[0], HasSubstr("c0/50..50-A"));
}

TEST(FindIdsOutsideRangesTest, NumberAboveWhatTheClientMayHaveUsedIsAFinding) {
  // The client returned 6..10 (used_high 5), yet holds 8.
  const IdFindings f = FindIdsOutsideRanges({LedgerRun{"c0", "A", 1, 8}},
                                            {Given("c0", "A", 1, 10, 5)});
  EXPECT_EQ(f.numbers, 3);
}

TEST(FindIdsOutsideRangesTest, RangeOfAnotherCollectionOrCounterCoversNothing) {
  const IdFindings f = FindIdsOutsideRanges(
      {LedgerRun{"c0", "A", 1, 10}},
      {Given("c1", "A", 1, 10, 10), Given("c0", "B", 1, 10, 10)});
  EXPECT_EQ(f.numbers, 10);
}

TEST(FindIdsOutsideRangesTest, NumbersAcrossAdjacentRangesAreNoFinding) {
  const IdFindings f = FindIdsOutsideRanges(
      {LedgerRun{"c0", "A", 1, 30}},
      {Given("c0", "A", 11, 20, 20), Given("c0", "A", 1, 10, 10),
       Given("c0", "A", 21, 40, 30)});
  EXPECT_EQ(f.numbers, 0);
  EXPECT_THAT(f.problems, IsEmpty());
}

TEST(FindIdsOutsideRangesTest, DescribesAtMostTheAskedNumberOfRuns) {
  const IdFindings f = FindIdsOutsideRanges(
      {LedgerRun{"c0", "A", 1, 1}, LedgerRun{"c0", "A", 3, 1},
       LedgerRun{"c0", "A", 5, 1}},
      {},
      /*max_problems=*/2);
  EXPECT_EQ(f.numbers, 3);
  EXPECT_THAT(f.problems, SizeIs(2));
}

// ------------------------------------------------- overlapping ranges

TEST(FindOverlapsTest, RangesOfOneCounterThatOverlapAreAFinding) {
  EXPECT_THAT(
      FindOverlaps({Given("c0", "A", 1, 10, 10), Given("c0", "A", 10, 20, 20)}),
      SizeIs(1));
}

TEST(FindOverlapsTest, DisjointRangesOrRangesOfAnotherCounterAreNoFinding) {
  EXPECT_THAT(
      FindOverlaps({Given("c0", "A", 1, 10, 10), Given("c0", "A", 11, 20, 20),
                    Given("c0", "B", 1, 10, 10), Given("c1", "A", 1, 10, 10)}),
      IsEmpty());
}

// ------------------------------------------------------- stored Max

TEST(CheckStoredMaxTest, MaxBelowARepliedHighIsAFinding) {
  const StoredMaxFindings f = CheckStoredMax(
      "A", "A", {{"c0", 99}}, {{{"c0", "A"}, 100}}, "after kill -9 #1 (file)");
  EXPECT_EQ(f.checked, 1);
  ASSERT_THAT(f.problems, SizeIs(1));
  EXPECT_THAT(f.problems[0], HasSubstr("after kill -9 #1 (file)"));
  EXPECT_THAT(f.problems[0], HasSubstr("99"));
}

TEST(CheckStoredMaxTest, MissingRowForARepliedRangeIsAFinding) {
  const StoredMaxFindings f =
      CheckStoredMax("A", "A", {}, {{{"c0", "A"}, 1}}, "at the end");
  EXPECT_THAT(f.problems, SizeIs(1));
}

TEST(CheckStoredMaxTest, MaxAtOrAboveEveryRepliedHighIsNoFinding) {
  const StoredMaxFindings f =
      CheckStoredMax("A", "A", {{"c0", 100}, {"c1", 500}},
                     {{{"c0", "A"}, 100}, {{"c1", "A"}, 20}}, "at the end");
  EXPECT_EQ(f.checked, 2);
  EXPECT_THAT(f.problems, IsEmpty());
}

TEST(CheckStoredMaxTest, FloorsOfAnotherCounterAreNotChecked) {
  const StoredMaxFindings f =
      CheckStoredMax("A", "A", {{"c0", 1}}, {{{"c0", "B"}, 100}}, "at the end");
  EXPECT_EQ(f.checked, 0);
  EXPECT_THAT(f.problems, IsEmpty());
}

TEST(CheckStoredMaxTest, SharedStoreChecksTheSharedCounter) {
  const StoredMaxFindings f =
      CheckStoredMax("B", CounterOf("B", /*shared_store=*/true), {{"c0", 50}},
                     {{{"c0", "*"}, 100}}, "at the end");
  EXPECT_EQ(f.checked, 1);
  EXPECT_THAT(f.problems, SizeIs(1));
}

TEST(CounterOfTest, OwnTagOrOneSharedCounter) {
  EXPECT_EQ(CounterOf("A", false), "A");
  EXPECT_EQ(CounterOf("A", true), "*");
  EXPECT_THAT(ByCounter({Given("c0", "B", 1, 2, 2)}, true),
              ElementsAre(::testing::Field(&UsedRange::node_tag, "*")));
}

}  // namespace
}  // namespace hilo::stress
