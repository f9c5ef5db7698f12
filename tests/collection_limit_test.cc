// CollectionLimit: the count of collections and the creations of the last
// minute, at their edges, on a manual clock.
#include "service/access/collection_limit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// Reserves and creates `n` collections; false if any reservation failed.
bool Create(CollectionLimit& limit, int n) {
  for (int i = 0; i < n; ++i) {
    if (!limit.TryReserve()) return false;
    limit.Settle(/*reserved=*/true, /*created=*/true);
  }
  return true;
}

TEST(CollectionLimitTest, CreationsPerMinuteStopAtTheLimitExactly) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/0, /*existing=*/0, 3, &clock);
  ASSERT_TRUE(Create(limit, 3));
  EXPECT_FALSE(limit.TryReserve());
  EXPECT_EQ(limit.count(), 3);
}

TEST(CollectionLimitTest, ACreationLeavesTheWindowExactlyOneMinuteLater) {
  ManualClock clock(kStart);
  CollectionLimit limit(0, 0, 3, &clock);
  ASSERT_TRUE(Create(limit, 1));  // at 0 s
  clock.Advance(absl::Seconds(20));
  ASSERT_TRUE(Create(limit, 2));  // at 20 s
  clock.Set(kStart + absl::Minutes(1) - absl::Microseconds(1));
  EXPECT_FALSE(limit.TryReserve());
  // The first creation is out; the two at 20 s are still in.
  clock.Set(kStart + absl::Minutes(1));
  EXPECT_TRUE(Create(limit, 1));
  EXPECT_FALSE(limit.TryReserve());
  clock.Set(kStart + absl::Seconds(80));
  EXPECT_TRUE(Create(limit, 2));
  EXPECT_FALSE(limit.TryReserve());
  EXPECT_EQ(limit.count(), 6);
}

TEST(CollectionLimitTest, ReservationsInFlightCountAgainstTheWindow) {
  ManualClock clock(kStart);
  CollectionLimit limit(0, 0, 2, &clock);
  ASSERT_TRUE(limit.TryReserve());
  ASSERT_TRUE(limit.TryReserve());
  EXPECT_FALSE(limit.TryReserve());
  // A call on an existing collection created nothing: its place is free.
  limit.Settle(/*reserved=*/true, /*created=*/false);
  EXPECT_TRUE(limit.TryReserve());
}

TEST(CollectionLimitTest, RefusalNamesTheRateLimitAndWhenToRetry) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/100, 0, 2, &clock);
  ASSERT_TRUE(Create(limit, 2));
  clock.Advance(absl::Seconds(15));
  ASSERT_FALSE(limit.TryReserve());
  EXPECT_THAT(
      limit.RefuseNewCollection("x"),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("collection \"x\" would be new"),
                     HasSubstr("limit of 2 collections in the last minute "
                               "(--max_collection_creations_per_minute)"),
                     HasSubstr("retry in 45s"))));
  EXPECT_EQ(CollectionRefusalReason(limit.RefuseNewCollection("x")),
            kRefusedForRate);
}

TEST(CollectionLimitTest, RefusalNamesTheCountWhenTheCountIsFull) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/2, 0, 100, &clock);
  ASSERT_TRUE(Create(limit, 2));
  ASSERT_FALSE(limit.TryReserve());
  EXPECT_THAT(
      limit.RefuseNewCollection("x"),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("limit of 2 collections (--max_collections)")));
  EXPECT_EQ(CollectionRefusalReason(limit.RefuseNewCollection("x")),
            kRefusedForCount);
  // A full disk is RESOURCE_EXHAUSTED too, but no refusal of the limit.
  EXPECT_EQ(CollectionRefusalReason(absl::ResourceExhaustedError(
                "collection \"x\" would be new, and this node already")),
            "");
}

// Per-identity windows: each identity's creations and reservations count
// in its own window as well as in the node's; one identity's full window
// refuses only it; an identity whose window empties is forgotten at its
// next call.
TEST(CollectionLimitTest, EachIdentityHasAWindowOfItsOwn) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/0, 0, /*max_creations_per_minute=*/5, &clock);
  const CreationQuota app{"cn:app", 2};
  const CreationQuota shop{"cn:shop", 2};
  ASSERT_TRUE(limit.TryReserve(&app));
  ASSERT_TRUE(limit.TryReserve(&app));
  EXPECT_FALSE(limit.TryReserve(&app));         // two reservations in flight
  limit.Settle(true, /*created=*/false, &app);  // an existing collection
  ASSERT_TRUE(limit.TryReserve(&app));
  limit.Settle(true, true, &app);
  limit.Settle(true, true, &app);
  EXPECT_FALSE(limit.TryReserve(&app));
  EXPECT_EQ(CollectionRefusalReason(limit.RefuseNewCollection("x", &app)),
            kRefusedForIdentityRate);
  ASSERT_TRUE(limit.TryReserve(&shop));
  limit.Settle(true, true, &shop);
  EXPECT_EQ(limit.identities_tracked(), 2);
  clock.Advance(absl::Minutes(1));
  EXPECT_TRUE(limit.TryReserve(&app));
  limit.Settle(true, false, &app);
  EXPECT_EQ(limit.identities_tracked(), 1);  // app's is forgotten
  EXPECT_EQ(limit.count(), 3);
}

TEST(CollectionLimitTest, ZeroMeansNoRateLimit) {
  ManualClock clock(kStart);
  CollectionLimit limit(0, 0, 0, &clock);
  EXPECT_TRUE(Create(limit, 10'000));
}

TEST(CollectionLimitTest, DeletionFreesACountButNoCreation) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/2, 0, 2, &clock);
  ASSERT_TRUE(Create(limit, 2));
  limit.Deleted();
  EXPECT_EQ(limit.count(), 1);
  // The count has room, the minute has none: churning names through
  // create and delete is still held to the rate.
  EXPECT_FALSE(limit.TryReserve());
  clock.Advance(absl::Minutes(1));
  EXPECT_TRUE(Create(limit, 1));
  EXPECT_FALSE(limit.TryReserve());
}

// At the limit a call on an existing collection goes ahead unreserved; if a
// DeleteCollection removed the row before its write, the call creates it
// again, and that creation counts like any other.
TEST(CollectionLimitTest, AnUnreservedCreationCountsInTheCountAndTheWindow) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/2, 0, 3, &clock);
  ASSERT_TRUE(Create(limit, 2));  // at 0 s
  ASSERT_FALSE(limit.TryReserve());
  clock.Advance(absl::Seconds(10));
  limit.Deleted();
  limit.Settle(/*reserved=*/false, /*created=*/true);  // at 10 s
  EXPECT_EQ(limit.count(), 2);
  EXPECT_FALSE(limit.TryReserve());
  // With room in the count, the window holds all three creations until
  // the first two leave it.
  limit.Deleted();
  clock.Set(kStart + absl::Minutes(1) - absl::Microseconds(1));
  EXPECT_FALSE(limit.TryReserve());
  clock.Set(kStart + absl::Minutes(1));
  EXPECT_TRUE(limit.TryReserve());
}

TEST(CollectionLimitTest, AnUnreservedCallOnAnExistingRowChangesNothing) {
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/1, 0, 0, &clock);
  ASSERT_TRUE(Create(limit, 1));
  ASSERT_FALSE(limit.TryReserve());
  limit.Settle(/*reserved=*/false, /*created=*/false);
  EXPECT_EQ(limit.count(), 1);
  // No reservation ended, so none was freed.
  EXPECT_FALSE(limit.TryReserve());
}

}  // namespace
}  // namespace hilo
