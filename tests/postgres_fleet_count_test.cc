// The PostgreSQL store's max_collections, counted for every store (every
// hilo server) on one database (issue 36 item 5), on a real server: the
// fleet's count row of postgres_fleet_count.cc, not this server's own
// count (postgres_collection_count.h). The suite keeps its older name.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/postgres/postgres_range_store.h"
#include "testing/postgres_instance.h"
#include "testing/postgres_schema_fixture.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::OpenTransaction;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::PostgresSchemaTest;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;

class PostgresCollectionCountTest : public PostgresSchemaTest {
 protected:
  // A store on this test's schema, as one hilo server with
  // --max_collections=`max`.
  std::unique_ptr<PostgresRangeStore> Open(int64_t max) {
    PostgresRangeStoreOptions options = StoreOptions();
    options.max_collections = max;
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
        PostgresRangeStore::Open(std::move(options));
    EXPECT_THAT(store, IsOk());
    return store.ok() ? *std::move(store) : nullptr;
  }

  // A value the database computes, as text.
  std::string Query(const std::string& sql) {
    std::string value;
    EXPECT_THAT(PostgresInstance::Execute(uri_, sql, &value), IsOk());
    return value;
  }

  static absl::StatusOr<Range> Next(RangeStore& store,
                                    const std::string& name) {
    return store.Allocate(name, 8, 0, NextToken());
  }
};

TEST_F(PostgresCollectionCountTest, TwoServersShareOneLimit) {
  std::unique_ptr<PostgresRangeStore> first = Open(3);
  std::unique_ptr<PostgresRangeStore> second = Open(3);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_THAT(Next(*first, "a1"), IsOk());
  ASSERT_THAT(Next(*first, "a2"), IsOk());
  ASSERT_THAT(Next(*second, "b1"), IsOk());
  absl::StatusOr<Range> refused = Next(*second, "b2");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("collection \"b2\" would be new, "
                                          "and the store already holds its "
                                          "limit of 3 collections")));
  EXPECT_TRUE(IsStoreFullRefusal(refused.status()));
  EXPECT_THAT(second->SetFloor("b2", 5),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Next(*first, "a3"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Query("SELECT count(*) FROM hilo_collections"), "3");
  // Existing collections keep working, on either server.
  absl::StatusOr<Range> more = Next(*second, "a1");
  ASSERT_THAT(more, IsOk());
  EXPECT_EQ(*more, (Range{9, 16}));
  // A retirement on one server frees a place for the other.
  ASSERT_THAT(first->Retire("a1"), IsOk());
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"), "2");
  absl::StatusOr<Range> created = Next(*second, "b2");
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ(*created, (Range{1, 8}));
  EXPECT_THAT(Next(*first, "a1"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"), "3");
}

TEST_F(PostgresCollectionCountTest, RacingCreationsNeverPassTheLimit) {
  constexpr int kLimit = 20;
  constexpr int kPerServer = 40;
  std::vector<std::unique_ptr<PostgresRangeStore>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(Open(kLimit));
  for (const auto& server : servers) ASSERT_NE(server, nullptr);
  std::vector<std::vector<absl::Status>> outcomes(servers.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < servers.size(); ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < kPerServer; ++i) {
        outcomes[s].push_back(
            Next(*servers[s], absl::StrCat("s", s, "-", i)).status());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int created = 0;
  for (const auto& server_outcomes : outcomes) {
    for (const absl::Status& status : server_outcomes) {
      if (status.ok()) {
        ++created;
      } else {
        // Full, or set aside past lock_timeout while others held the count.
        EXPECT_TRUE(IsStoreFullRefusal(status) ||
                    status.code() == absl::StatusCode::kUnavailable)
            << status;
      }
    }
  }
  EXPECT_LE(created, kLimit);
  EXPECT_EQ(Query("SELECT count(*) FROM hilo_collections"),
            absl::StrCat(created));
  // What places are left, one after another: exactly up to the limit.
  for (int i = created; i < kLimit; ++i) {
    ASSERT_THAT(Next(*servers[i % servers.size()], absl::StrCat("late-", i)),
                IsOk());
  }
  EXPECT_THAT(Next(*servers[0], "one-too-many"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Query("SELECT count(*) FROM hilo_collections"),
            absl::StrCat(kLimit));
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"),
            absl::StrCat(kLimit));
}

// A server frozen inside a batch that holds the count (here a session of
// the test's own) stops only creations: existing collections go on at once,
// a creation fails UNAVAILABLE once it has waited lock_timeout, and creates
// as soon as the count is free.
TEST_F(PostgresCollectionCountTest, CountHeldElsewhereStopsOnlyCreations) {
  std::unique_ptr<PostgresRangeStore> store = Open(10);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(Next(*store, "old"), IsOk());
  absl::StatusOr<std::unique_ptr<OpenTransaction>> frozen =
      OpenTransaction::Begin(
          uri_, "SELECT rows FROM hilo_collection_count FOR UPDATE");
  ASSERT_THAT(frozen, IsOk());
  // The creation first, the existing collection right behind it (in its
  // batch, or the next one on the same connection).
  testing_util::Notification created_done;
  absl::StatusOr<Allocation> creation;
  store->AllocateAsync("new", 8, 0, NextToken(), kNoFloorJumpLimit,
                       [&](absl::StatusOr<Allocation> a) {
                         creation = std::move(a);
                         created_done.Notify();
                       });
  const absl::Time start = absl::Now();
  absl::StatusOr<Range> old = Next(*store, "old");
  const absl::Duration took = absl::Now() - start;
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(*old, (Range{9, 16}));
  EXPECT_LT(took, absl::Seconds(1));
  created_done.WaitForNotification();
  EXPECT_THAT(creation,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("\"new\"")));
  EXPECT_EQ(Query("SELECT count(*) FROM hilo_collections"), "1");
  frozen->reset();
  absl::StatusOr<Range> created = Next(*store, "new");
  ASSERT_THAT(created, IsOk());
  EXPECT_EQ(*created, (Range{1, 8}));
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"), "2");
}

TEST_F(PostgresCollectionCountTest, CountIsMadeAgainAtEveryStart) {
  std::unique_ptr<PostgresRangeStore> store = Open(2);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(Next(*store, "a"), IsOk());
  // As an older server would leave it: rows it created, never counted.
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_, "UPDATE hilo_collection_count SET rows = 0"),
              IsOk());
  store.reset();
  store = Open(2);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"), "1");
  ASSERT_THAT(Next(*store, "b"), IsOk());
  EXPECT_THAT(Next(*store, "c"),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST_F(PostgresCollectionCountTest, WithoutALimitTheCountStillMoves) {
  std::unique_ptr<PostgresRangeStore> store = Open(0);
  ASSERT_NE(store, nullptr);
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_THAT(Next(*store, name), IsOk());
  }
  ASSERT_THAT(store->SetFloor("typo", 0), IsOk());
  ASSERT_THAT(store->Delete("typo"), IsOk());
  ASSERT_THAT(store->Retire("a"), IsOk());
  EXPECT_EQ(Query("SELECT rows FROM hilo_collection_count"), "2");
  // A server with a limit started later finds the count right.
  std::unique_ptr<PostgresRangeStore> limited = Open(3);
  ASSERT_NE(limited, nullptr);
  ASSERT_THAT(Next(*limited, "d"), IsOk());
  EXPECT_THAT(Next(*limited, "e"),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace hilo
