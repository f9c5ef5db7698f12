// The PostgreSQL store's own behaviour, on a real server: many stores (as
// many hilo servers) on one database, schema checks, and the faults a
// network database brings. What every store does is in
// range_store_contract_test.cc.
#include "service/store/postgres/postgres_range_store.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/postgres_instance.h"
#include "testing/postgres_schema_fixture.h"
#include "testing/postgres_session.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::PostgresSchemaTest;
using ::hilo::testing_util::PostgresSession;
using ::hilo::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<std::unique_ptr<PostgresRangeStore>> OpenOn(
    const std::string& uri) {
  PostgresRangeStoreOptions options;
  options.uri = uri;
  return PostgresRangeStore::Open(std::move(options));
}

class PostgresRangeStoreTest : public PostgresSchemaTest {
 protected:
  // Options of a store on this test's schema that claims one of
  // `candidates` as `holder`.
  PostgresRangeStoreOptions WithTags(std::vector<std::string> candidates,
                                     std::string holder) const {
    PostgresRangeStoreOptions options = StoreOptions();
    NodeTagLease& lease = options.node_tag_lease.emplace();
    lease.candidates = std::move(candidates);
    lease.holder = std::move(holder);
    return options;
  }
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> OpenWithTags(
      std::vector<std::string> candidates, std::string holder) const {
    return PostgresRangeStore::Open(
        WithTags(std::move(candidates), std::move(holder)));
  }
  // A store that holds tag X for 30 s and renews it every 50 ms.
  PostgresRangeStoreOptions RenewingX() const {
    PostgresRangeStoreOptions options = WithTags({"X"}, "host-a pid 1");
    options.probe_interval = absl::Milliseconds(50);
    options.node_tag_lease->duration = absl::Seconds(30);
    return options;
  }
  // Makes tag X's claim run out a second from now, so that kXRenewed holds
  // again only once a renewal has put it 30 s ahead.
  absl::Status ShortenClaimOfX() const {
    return PostgresInstance::Execute(
        uri_,
        "UPDATE hilo_nodes SET expires_at = now() + interval '1 second' "
        "WHERE tag = 'X'");
  }
};

// "t" once tag X's claim runs 20 s or more ahead (see ShortenClaimOfX).
constexpr char kXRenewed[] =
    "SELECT expires_at > now() + interval '20 seconds' FROM hilo_nodes "
    "WHERE tag = 'X'";

// Holds each read batch of a store at its start, from the first one until
// Release: the test knows the read queue is stuck once WaitUntilHeld
// returns. Release before the store is destroyed.
class ReadBatchGate {
 public:
  void InstallIn(PostgresRangeStoreOptions& options) {
    options.before_read_batch_for_testing = [this] {
      if (!hold_.load()) return;
      entered_.Notify();
      released_.wait();
    };
  }
  void WaitUntilHeld() { entered_.WaitForNotification(); }
  void Release() {
    hold_ = false;
    release_.set_value();
  }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<bool> hold_{true};
  testing_util::Notification entered_;
};

// Reads run on a connection of their own: a read batch that is held back
// delays no allocation.
TEST_F(PostgresRangeStoreTest, WriteCompletesWhileAReadBatchIsHeldBack) {
  ReadBatchGate gate;
  PostgresRangeStoreOptions options = StoreOptions();
  gate.InstallIn(options);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  std::promise<absl::StatusOr<std::vector<NamedCollectionState>>> listed;
  (*store)->ListAsync(
      "", 10, [&](absl::StatusOr<std::vector<NamedCollectionState>> rows) {
        listed.set_value(std::move(rows));
      });
  gate.WaitUntilHeld();  // the read batch is held from here on

  std::promise<absl::StatusOr<Allocation>> allocated;
  std::future<absl::StatusOr<Allocation>> allocation = allocated.get_future();
  (*store)->AllocateAsync(
      "orders", 32, 0, NextToken(), kNoFloorJumpLimit,
      [&](absl::StatusOr<Allocation> a) { allocated.set_value(std::move(a)); });
  const bool in_time =
      allocation.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  gate.Release();
  EXPECT_TRUE(in_time) << "NextRange waited for a ListCollections";
  absl::StatusOr<Allocation> a = allocation.get();
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->range, (Range{1, 32}));
  EXPECT_THAT(listed.get_future().get(), IsOk());
  // The reading connection sees the write once it committed.
  absl::StatusOr<std::optional<CollectionState>> row = (*store)->Get("orders");
  ASSERT_THAT(row, IsOk());
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->max, 32);
}

// Two servers on one database share every collection's row: their ranges
// tile 1..Max, including those of collections both create at once.
TEST_F(PostgresRangeStoreTest, ServersOnOneDatabaseNeverOverlap) {
  constexpr int kServers = 3;
  constexpr int kThreadsEach = 3;
  constexpr int kPerThread = 60;
  constexpr int kCollections = 5;
  std::vector<std::unique_ptr<PostgresRangeStore>> servers;
  for (int i = 0; i < kServers; ++i) {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = OpenStore();
    ASSERT_THAT(store, IsOk());
    servers.push_back(*std::move(store));
  }
  std::vector<std::vector<std::pair<int, Range>>> got(kServers * kThreadsEach);
  std::vector<std::thread> threads;
  for (int t = 0; t < kServers * kThreadsEach; ++t) {
    threads.emplace_back([&, t] {
      PostgresRangeStore& store = *servers[t % kServers];
      for (int i = 0; i < kPerThread; ++i) {
        const int c = (t + i) % kCollections;
        absl::StatusOr<Range> r = store.Allocate(
            absl::StrCat("c", c), 1 + (t * 7 + i) % 40, 0, NextToken());
        ASSERT_THAT(r, IsOk());
        got[t].push_back({c, *r});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int c = 0; c < kCollections; ++c) {
    std::vector<Range> all;
    for (const auto& per_thread : got) {
      for (const auto& [collection, range] : per_thread) {
        if (collection == c) all.push_back(range);
      }
    }
    std::sort(all.begin(), all.end(),
              [](const Range& a, const Range& b) { return a.low < b.low; });
    int64_t next = 1;
    for (const Range& r : all) {
      ASSERT_EQ(r.low, next) << "collection c" << c;
      next = r.high + 1;
    }
    absl::StatusOr<std::optional<CollectionState>> stored =
        servers[0]->Get(absl::StrCat("c", c));
    ASSERT_TRUE(stored.ok() && stored->has_value()) << stored.status();
    EXPECT_EQ((*stored)->max, next - 1);
  }
}

// What service/store/postgres/README.md says a session that creates a
// collection's row holds first: pg_advisory_xact_lock on the first 8 bytes
// of SHA-256(the salt in hilo_lock_salt, schema name, a zero byte,
// collection name), a big-endian BIGINT. Written here from that text, for a
// session of the test's own that creates `name` as a hilo server would;
// without `salted`, the key as it was before the salt (issue 36 item 4),
// which any role that may connect could compute.
std::string CreationLockKeySql(const std::string& name, bool salted = true) {
  return absl::StrCat(
      "('x' || substr(encode(sha256(",
      salted ? "(SELECT salt FROM hilo_lock_salt) || " : "",
      "convert_to((SELECT nspname FROM pg_namespace n JOIN pg_class c ON "
      "c.relnamespace = n.oid WHERE c.relname = 'hilo_collections' AND "
      "pg_table_is_visible(c.oid)), 'UTF8') || '\\x00'::bytea || "
      "convert_to('",
      name, "', 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint");
}
std::string TakeCreationLockSql(const std::string& name) {
  return absl::StrCat("SELECT pg_advisory_xact_lock(", CreationLockKeySql(name),
                      ")");
}

// Holds the commit of the first batch after Arm at the moment its COMMIT is
// sent, until Release: operations queued meanwhile go into the next batch
// together. Every wait is bounded (a test failure, not a hang).
class CommitGate {
 public:
  void InstallIn(PostgresRangeStoreOptions& options) {
    options.after_commit_sent_for_testing = [this](int) {
      if (!armed_.exchange(false)) return;
      entered_.set_value();
      released_.wait_for(std::chrono::seconds(30));
    };
  }
  void Arm() { armed_ = true; }
  bool WaitUntilHeld() {
    return entered_future_.wait_for(std::chrono::seconds(30)) ==
           std::future_status::ready;
  }
  void Release() { release_.set_value(); }

 private:
  std::atomic<bool> armed_{false};
  std::promise<void> entered_;
  std::future<void> entered_future_ = entered_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

// An asynchronous allocation's answer, awaited with a bound.
class PendingRange {
 public:
  StoreCallback<Allocation> Callback() {
    return [this](absl::StatusOr<Allocation> got) {
      promise_.set_value(std::move(got));
    };
  }
  bool Ready() const {
    return future_.wait_for(std::chrono::seconds(0)) ==
           std::future_status::ready;
  }
  // The answer, or DEADLINE_EXCEEDED (a test failure) after `bound`.
  absl::StatusOr<Allocation> Get(std::chrono::seconds bound) {
    if (future_.wait_for(bound) != std::future_status::ready) {
      return absl::DeadlineExceededError("the allocation never completed");
    }
    return future_.get();
  }

 private:
  std::promise<absl::StatusOr<Allocation>> promise_;
  std::shared_future<absl::StatusOr<Allocation>> future_ =
      promise_.get_future().share();
};

// Begins `holder`'s transaction and inserts `name`'s row (Max 32, return
// floor `floor`) under the creation lock, as a hilo server creating it
// would, without committing.
void BeginCreating(PostgresSession& holder, const std::string& name,
                   int floor) {
  holder.Query("BEGIN");
  holder.Query(TakeCreationLockSql(name));
  holder.Query(absl::StrCat(
      "INSERT INTO hilo_collections (name, max, return_floor, updated_at_us, "
      "range_token, previous_token, previous_return_floor) VALUES "
      "(convert_to('",
      name, "', 'UTF8'), 32, ", floor, ", 0, 0, 0, 0)"));
}

// A store on `uri` whose batches `gate` can hold. Its lock_timeout is long
// enough that an operation set aside is still waiting when the rest of its
// batch has answered, even on a loaded machine.
absl::StatusOr<std::unique_ptr<PostgresRangeStore>> OpenGated(
    const std::string& uri, CommitGate& gate) {
  PostgresRangeStoreOptions options;
  options.uri = uri;
  options.lock_timeout = absl::Seconds(3);
  gate.InstallIn(options);
  return PostgresRangeStore::Open(std::move(options));
}

// Queues NextRange of "held" (being created by another session) and of
// "other" into one batch, behind "warm"'s, which the gate holds: "other"
// does not wait for "held", and gets 1-32 while "held" is still set aside.
void ExpectOtherServedWhileHeldWaits(PostgresRangeStore& store,
                                     CommitGate& gate, PendingRange& held,
                                     absl::StatusOr<Allocation>* got_other) {
  gate.Arm();
  PendingRange warm, other;
  store.AllocateAsync("warm", 32, 0, NextToken(), kNoFloorJumpLimit,
                      warm.Callback());
  ASSERT_TRUE(gate.WaitUntilHeld());
  store.AllocateAsync("held", 32, 0, NextToken(), kNoFloorJumpLimit,
                      held.Callback());
  store.AllocateAsync("other", 32, 0, NextToken(), kNoFloorJumpLimit,
                      other.Callback());
  gate.Release();
  ASSERT_THAT(warm.Get(std::chrono::seconds(30)), IsOk());
  *got_other = other.Get(std::chrono::seconds(30));
  ASSERT_THAT(*got_other, IsOk());
  EXPECT_EQ((*got_other)->range.low, 1);
  EXPECT_EQ((*got_other)->range.high, 32);
  EXPECT_FALSE(held.Ready())
      << "the allocation of \"held\" completed with \"other\"'s batch";
}

// A collection another session is creating (its row inserted, not
// committed, under the creation lock: a hilo server frozen inside its
// transaction, or psql) holds up only the operations on it: the rest of
// their batch commits at once, and they fail UNAVAILABLE naming the
// collection after lock_timeout; once that session rolls back, the
// collection is created here; one that session commits meanwhile is served
// above what it stored. No number is handed out twice.
TEST_F(PostgresRangeStoreTest, CollectionCreatedElsewhereHoldsUpOnlyItself) {
  CommitGate gate;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> opened =
      OpenGated(uri_, gate);
  ASSERT_THAT(opened, IsOk());
  PostgresRangeStore& store = **opened;
  PostgresSession holder(uri_);
  BeginCreating(holder, "held", /*floor=*/0);
  PendingRange held;
  absl::StatusOr<Allocation> got_other;
  ASSERT_NO_FATAL_FAILURE(
      ExpectOtherServedWhileHeldWaits(store, gate, held, &got_other));
  EXPECT_GE(store.counters().creations_set_aside, 1);

  absl::StatusOr<Allocation> got_held = held.Get(std::chrono::seconds(30));
  EXPECT_THAT(got_held,
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("\"held\""),
                             HasSubstr("being created by another session"))));
  EXPECT_EQ(store.counters().locked_failures, 1);

  // The creator gives up: "held" is created here, from 1.
  holder.Query("ROLLBACK");
  std::vector<Range> held_ranges, other_ranges = {got_other->range};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Range> r = store.Allocate("held", 32, 0, NextToken());
    ASSERT_THAT(r, IsOk());
    held_ranges.push_back(*r);
    r = store.Allocate("other", 32, 0, NextToken());
    ASSERT_THAT(r, IsOk());
    other_ranges.push_back(*r);
  }

  // Another creator, which commits while this store's allocation of its
  // collection is set aside: that allocation then starts above what the
  // creator stored (1-32 went to the creator's client).
  BeginCreating(holder, "late", /*floor=*/31);
  const int64_t set_aside_before = store.counters().creations_set_aside;
  PendingRange late;
  store.AllocateAsync("late", 32, 0, NextToken(), kNoFloorJumpLimit,
                      late.Callback());
  const auto bound =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store.counters().creations_set_aside == set_aside_before &&
         std::chrono::steady_clock::now() < bound) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(store.counters().creations_set_aside, set_aside_before);
  holder.Query("COMMIT");
  absl::StatusOr<Allocation> got_late = late.Get(std::chrono::seconds(30));
  ASSERT_THAT(got_late, IsOk());
  EXPECT_FALSE(got_late->created);

  // Every range, exactly.
  auto expect_consecutive = [](const std::vector<Range>& ranges, int64_t first,
                               const char* collection) {
    int64_t next = first;
    for (const Range& r : ranges) {
      EXPECT_EQ(r.low, next) << collection;
      EXPECT_EQ(r.high, next + 31) << collection;
      next = r.high + 1;
    }
  };
  expect_consecutive(held_ranges, 1, "held");
  expect_consecutive(other_ranges, 1, "other");
  expect_consecutive({got_late->range}, 33, "late");
}

// The creation lock's key names the schema that holds the table, not the
// session's current schema (README, "Creating a collection"): a server
// whose search path starts with an empty schema of its own, and finds
// hilo's tables further along it, still sees another session's creation
// under the lock and sets only that collection aside.
TEST_F(PostgresRangeStoreTest, CreationLockIsTheTablesWhateverTheSearchPath) {
  ASSERT_THAT(OpenStore(), IsOk());  // the tables, in this test's schema
  const std::string::size_type at = uri_.find("%3D");
  ASSERT_NE(at, std::string::npos) << uri_;
  const std::string schema = uri_.substr(at + 3);
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_, absl::StrCat("CREATE SCHEMA ", schema, "_first")),
              IsOk());
  CommitGate gate;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> opened = OpenGated(
      absl::StrCat(uri_.substr(0, at + 3), schema, "_first%2C", schema), gate);
  ASSERT_THAT(opened, IsOk());
  PostgresRangeStore& store = **opened;
  PostgresSession holder(uri_);
  BeginCreating(holder, "held", /*floor=*/0);
  PendingRange held;
  absl::StatusOr<Allocation> got_other;
  ASSERT_NO_FATAL_FAILURE(
      ExpectOtherServedWhileHeldWaits(store, gate, held, &got_other));
  holder.Query("ROLLBACK");
  absl::StatusOr<Allocation> got_held = held.Get(std::chrono::seconds(30));
  ASSERT_THAT(got_held, IsOk());
  EXPECT_EQ(got_held->range.low, 1);
  EXPECT_EQ(got_held->range.high, 32);
}

// Issue 36 item 4: a role that may connect to hilo's database but is not
// hilo's cannot read the creation locks' salt, so it cannot compute a key.
// Holding every key it can compute (the scheme without the salt, which the
// README once published) holds up no creation.
TEST_F(PostgresRangeStoreTest, ForeignRoleCannotBlockACreation) {
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> opened = OpenStore();
  ASSERT_THAT(opened, IsOk());
  PostgresRangeStore& store = **opened;
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "DO $$ BEGIN CREATE ROLE hilo_foreign LOGIN; EXCEPTION WHEN "
                  "duplicate_object THEN NULL; END $$"),
              IsOk());
  const std::string::size_type at = uri_.find("%3D");
  ASSERT_NE(at, std::string::npos) << uri_;
  const std::string schema = uri_.substr(at + 3);
  // The schema is as usable to it as `public` is to every role.
  ASSERT_THAT(
      PostgresInstance::Execute(uri_, absl::StrCat("GRANT USAGE ON SCHEMA ",
                                                   schema, " TO hilo_foreign")),
      IsOk());
  std::string foreign_uri = uri_;
  const std::string::size_type user = foreign_uri.find("postgres@");
  ASSERT_NE(user, std::string::npos) << uri_;
  foreign_uri.replace(user, std::strlen("postgres@"), "hilo_foreign@");
  EXPECT_THAT(
      PostgresInstance::Execute(foreign_uri, "SELECT salt FROM hilo_lock_salt"),
      StatusIs(absl::StatusCode::kInternal,
               HasSubstr("permission denied for table hilo_lock_salt")));
  PostgresSession foreign(foreign_uri);
  foreign.Query("BEGIN");
  foreign.Query(absl::StrCat(
      "SELECT pg_advisory_xact_lock(('x' || substr(encode(sha256(convert_to('",
      schema,
      "', 'UTF8') || '\\x00'::bytea || convert_to('victim', 'UTF8')), "
      "'hex'), 1, 16))::bit(64)::bigint)"));
  absl::StatusOr<Range> range = store.Allocate("victim", 32, 0, NextToken());
  ASSERT_THAT(range, IsOk());
  EXPECT_EQ(*range, (Range{1, 32}));
  EXPECT_EQ(store.counters().creations_set_aside, 0);
  foreign.Query("ROLLBACK");
}

// Each creation holds a lock of the database's shared lock table until
// its commit (README, "Creating a collection"): a burst of new collections
// queued into one batch is created at most 64 per commit, the rest in the
// commits right after, and every one of them gets its first range.
TEST_F(PostgresRangeStoreTest, BurstOfNewCollectionsIsCreatedAtMost64ACommit) {
  constexpr int kNew = 150;
  CommitGate gate;
  std::mutex mu;
  std::vector<int64_t> counts;  // rows after each commit, in order
  PostgresRangeStoreOptions options = StoreOptions();
  options.max_batch = 4096;
  options.on_commit = [&](absl::Duration, int, int64_t collections) {
    std::lock_guard<std::mutex> lock(mu);
    counts.push_back(collections);
  };
  gate.InstallIn(options);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> opened =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(opened, IsOk());
  PostgresRangeStore& store = **opened;

  gate.Arm();
  PendingRange warm;
  store.AllocateAsync("warm", 32, 0, NextToken(), kNoFloorJumpLimit,
                      warm.Callback());
  ASSERT_TRUE(gate.WaitUntilHeld());
  // The oldest creation goes first, whatever its name sorts as: one queued
  // before the burst and sorting after every name of it is created by the
  // first commit after warm's.
  size_t first_commits_seen = 0;
  std::promise<absl::StatusOr<Allocation>> first_done;
  store.AllocateAsync("zz-first", 32, 0, NextToken(), kNoFloorJumpLimit,
                      [&](absl::StatusOr<Allocation> got) {
                        {
                          std::lock_guard<std::mutex> lock(mu);
                          first_commits_seen = counts.size();
                        }
                        first_done.set_value(std::move(got));
                      });
  std::vector<std::unique_ptr<PendingRange>> burst;
  for (int i = 0; i < kNew; ++i) {
    burst.push_back(std::make_unique<PendingRange>());
    store.AllocateAsync(absl::StrCat("burst-", i), 32, 0, NextToken(),
                        kNoFloorJumpLimit, burst.back()->Callback());
  }
  gate.Release();
  ASSERT_THAT(warm.Get(std::chrono::seconds(30)), IsOk());
  std::future<absl::StatusOr<Allocation>> first = first_done.get_future();
  ASSERT_EQ(first.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  absl::StatusOr<Allocation> first_got = first.get();
  ASSERT_THAT(first_got, IsOk());
  EXPECT_EQ(first_got->range.low, 1);
  EXPECT_EQ(first_got->range.high, 32);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(first_commits_seen, 2u)
        << "the oldest creation waited behind newer ones";
  }
  for (int i = 0; i < kNew; ++i) {
    absl::StatusOr<Allocation> got = burst[i]->Get(std::chrono::seconds(30));
    ASSERT_THAT(got, IsOk()) << "burst-" << i;
    EXPECT_TRUE(got->created) << "burst-" << i;
    EXPECT_EQ(got->range.low, 1) << "burst-" << i;
    EXPECT_EQ(got->range.high, 32) << "burst-" << i;
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(counts.empty());
  EXPECT_EQ(counts.back(), kNew + 2);
  int64_t before = 0;
  for (int64_t after : counts) {
    EXPECT_LE(after - before, 64)
        << "one commit created " << after - before << " collections";
    before = after;
  }
}

TEST_F(PostgresRangeStoreTest, ServersStartingTogetherCreateTheSchemaOnce) {
  constexpr int kServers = 4;
  std::vector<absl::Status> opened(kServers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] { opened[i] = OpenStore().status(); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : opened) EXPECT_THAT(s, IsOk());
}

TEST_F(PostgresRangeStoreTest, OtherApplicationsSchemaIsFailedPrecondition) {
  ASSERT_THAT(
      PostgresInstance::Execute(uri_, "CREATE TABLE orders (id BIGINT)"),
      IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = OpenStore();
  EXPECT_THAT(store,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds 1 tables of another application")));
  // Nothing was created beside it.
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "DO $$ BEGIN IF to_regclass('hilo_meta') IS NOT NULL "
                  "THEN RAISE 'created'; END IF; END $$"),
              IsOk());
}

TEST_F(PostgresRangeStoreTest, NewerSchemaIsFailedPrecondition) {
  ASSERT_THAT(OpenStore(), IsOk());
  ASSERT_THAT(
      PostgresInstance::Execute(uri_,
                                "UPDATE hilo_meta SET value = '8' WHERE key = "
                                "'schema_version'"),
      IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = OpenStore();
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      store.status().message(),
      HasSubstr("has hilo schema version 8; this server understands 7"));
}

// Version 1 had no hilo_nodes; its collections survive the migration.
TEST_F(PostgresRangeStoreTest, SchemaVersionOneIsMigrated) {
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = OpenStore();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "DROP TABLE hilo_nodes; UPDATE hilo_meta SET value = '1' "
                  "WHERE key = 'schema_version'"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = OpenStore();
  ASSERT_THAT(store, IsOk());
  PostgresSession session(uri_);
  EXPECT_EQ(session.Query("SELECT value FROM hilo_meta WHERE key = "
                          "'schema_version'"),
            "7");
  EXPECT_EQ(session.Query("SELECT count(*) FROM hilo_nodes"), "0");
  EXPECT_EQ(session.Query("SELECT count(*) FROM hilo_retired"), "0");
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
}

TEST_F(PostgresRangeStoreTest, BadConnectionStringsAreClearErrors) {
  EXPECT_THAT(OpenOn("postgresql://host:notaport/db?bogus=1"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing listens on port 1.
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      OpenOn("postgresql://hilo@127.0.0.1:1/hilo?password=secret");
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable,
                              AllOf(HasSubstr("cannot connect to PostgreSQL at "
                                              "postgresql://hilo@127.0.0.1:1/"
                                              "hilo"),
                                    ::testing::Not(HasSubstr("secret")))));
}

// Breaks the connection on `socket` as a network failure would. Its reply
// may already wait in the socket's buffer: the socket becomes /dev/null,
// so libpq reads end-of-file (the number stays libpq's, which closes it
// later).
void CutConnection(int socket) {
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  ASSERT_EQ(dup2(null_fd, socket), socket);
  close(null_fd);
}

// The connection breaks after COMMIT was sent and committed, before its
// result is read: the writes are not reported applied, and the next
// allocation starts above what that COMMIT stored.
TEST_F(PostgresRangeStoreTest, CommitWithUnknownOutcomeIsNeverReportedApplied) {
  std::atomic<bool> cut{false};
  PostgresRangeStoreOptions options = StoreOptions();
  options.after_commit_sent_for_testing = [&](int socket) {
    if (!cut.exchange(false)) return;
    // Wait until the COMMIT is visible to another session, then cut the
    // connection before its reply is read.
    const std::string probe =
        "DO $$ BEGIN IF (SELECT max FROM hilo_collections WHERE name = "
        "'orders'::bytea) IS DISTINCT FROM 64 THEN RAISE 'not yet'; END IF; "
        "END $$";
    while (!PostgresInstance::Execute(uri_, probe).ok()) {
      std::this_thread::yield();
    }
    CutConnection(socket);
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  cut = true;
  absl::StatusOr<Range> lost = (*store)->Allocate("orders", 32, 0, NextToken());
  EXPECT_THAT(lost, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("outcome of the commit")));
  // It did commit 33-64; the next range starts above it.
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{65, 96}));
}

// Another server creates the collection while this one's batch would; the
// batch must run again, and if ending the failed transaction costs the
// connection, fail: its range was never stored.
TEST_F(PostgresRangeStoreTest,
       ConflictWhoseRollbackFailsIsNeverReportedApplied) {
  // The store's sessions carry a name of their own, to be found below.
  const std::string name = absl::StrCat("hilo_test_", getpid());
  const std::string uri = absl::StrCat(uri_, "&application_name=", name);
  ASSERT_THAT(OpenStore(), IsOk());  // the schema
  PostgresSession other(uri_);
  PostgresSession watcher(uri_);
  // The other server's row, not committed yet: invisible to the store's
  // reads, but its INSERT waits for it, then collides.
  other.Query("BEGIN");
  other.Query(
      "INSERT INTO hilo_collections VALUES ('x'::bytea, 100, 68, 0, 7, 0, 0)");
  std::atomic<bool> armed{true};
  PostgresRangeStoreOptions options;
  options.uri = uri;
  options.after_commit_sent_for_testing = [&](int) {
    if (!armed.exchange(false)) return;
    other.Query("COMMIT");
    // Once the store's transaction has failed on the key, end its session
    // before it can roll back (its results are already on their way).
    const std::string pid = absl::StrCat(
        "SELECT pid FROM pg_stat_activity WHERE application_name = '", name,
        "' AND state = 'idle in transaction (aborted)'");
    std::string found;
    while ((found = watcher.Query(pid)).empty()) std::this_thread::yield();
    watcher.Query(absl::StrCat("SELECT pg_terminate_backend(", found, ")"));
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  absl::StatusOr<Range> lost = (*store)->Allocate("x", 32, 0, NextToken());
  EXPECT_THAT(lost, StatusIs(absl::StatusCode::kUnavailable))
      << (lost.ok() ? absl::StrCat("handed out ", lost->low, "-", lost->high)
                    : lost.status().ToString());
  EXPECT_EQ((*store)->Allocate("x", 32, 0, NextToken()).value(),
            (Range{101, 132}));
}

// Each live server shows its own tag: a held tag goes to nobody else.
TEST_F(PostgresRangeStoreTest, NodeTagsAreClaimedOncePerLiveServer) {
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> a =
      OpenWithTags({"X", "Y"}, "host-a pid 1");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ((*a)->node_tag(), "X");
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> b =
      OpenWithTags({"X", "Y"}, "host-b pid 1");
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->node_tag(), "Y");
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> c =
      OpenWithTags({"X", "Y"}, "host-c pid 1");
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kFailedPrecondition,
                          AllOf(HasSubstr("every node tag this server may take "
                                          "is held by another live server (X "
                                          "by \"host-a pid 1\" for "),
                                HasSubstr("Y by \"host-b pid 1\" for "))));
  // The same holder (a container restarted in place) takes its own back.
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> again =
      OpenWithTags({"X"}, "host-a pid 1");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ((*again)->node_tag(), "X");
}

TEST_F(PostgresRangeStoreTest, ClosingReleasesTheNodeTag) {
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> a =
        OpenWithTags({"X"}, "host-a pid 1");
    ASSERT_THAT(a, IsOk());
  }
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> b =
      OpenWithTags({"X"}, "host-b pid 1");
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->node_tag(), "X");
}

// A crashed server's claim runs out; until then, a server that wants that
// very tag waits (wait_for_held) rather than failing.
TEST_F(PostgresRangeStoreTest, ClaimThatRanOutIsTakenOver) {
  ASSERT_THAT(OpenStore(), IsOk());  // the schema
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "INSERT INTO hilo_nodes VALUES ('X', 'crashed pid 7', "
                  "now() - interval '1 second'), ('Y', 'crashed pid 8', "
                  "now() + interval '1 hour')"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> a =
      OpenWithTags({"X"}, "host-a pid 1");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ((*a)->node_tag(), "X");

  PostgresRangeStoreOptions options = WithTags({"Y"}, "host-b pid 1");
  options.node_tag_lease->wait_for_held = absl::Minutes(1);
  std::future<absl::StatusOr<std::unique_ptr<PostgresRangeStore>>> b =
      std::async(std::launch::async,
                 [&] { return PostgresRangeStore::Open(std::move(options)); });
  // Still waiting: Y's claim has an hour to run.
  ASSERT_EQ(b.wait_for(std::chrono::milliseconds(500)),
            std::future_status::timeout);
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "UPDATE hilo_nodes SET expires_at = now() - interval '1 "
                  "second' WHERE tag = 'Y'"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> opened = b.get();
  ASSERT_THAT(opened, IsOk());
  EXPECT_EQ((*opened)->node_tag(), "Y");
}

// The probe renews the claim; a renewal that finds the tag taken reports
// it once, and closing the store then leaves the new holder's claim alone.
TEST_F(PostgresRangeStoreTest, ProbeRenewsTheClaimAndReportsItTaken) {
  std::promise<absl::Status> lost;
  std::atomic<int> reports{0};
  PostgresRangeStoreOptions options = RenewingX();
  options.on_node_tag_lost = [&](const absl::Status& status) {
    if (reports++ == 0) lost.set_value(status);
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT(ShortenClaimOfX(), IsOk());
  PostgresSession session(uri_);
  while (session.Query(kXRenewed) != "t") std::this_thread::yield();

  // Taken in a transaction a renewal has to wait for: the renewal's UPDATE
  // then sees the new holder, while its statement's snapshot still shows
  // this server; the report must name the new holder all the same.
  PostgresSession taker(uri_);
  taker.Query("BEGIN");
  taker.Query("UPDATE hilo_nodes SET holder = 'host-b pid 2' WHERE tag = 'X'");
  const std::string renewal_waits =
      "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = "
      "'Lock' AND query LIKE 'WITH renewed AS%'";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (session.Query(renewal_waits) != "t" && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(session.Query(renewal_waits), "t")
      << "no renewal waited for the taker's row lock";
  taker.Query("COMMIT");
  std::future<absl::Status> report = lost.get_future();
  ASSERT_EQ(report.wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  const absl::Status status = report.get();
  EXPECT_THAT(
      status,
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(": node tag X is now held by \"host-b pid 2\"; this "
                         "server could not renew its claim for 30s, and must "
                         "no longer use the tag")));
  store->reset();
  EXPECT_EQ(reports.load(), 1);
  EXPECT_EQ(session.Query("SELECT holder FROM hilo_nodes WHERE tag = 'X'"),
            "host-b pid 2");
}

// The lease is renewed on the connection the writes use, so a server whose
// reads are stuck (or whose read connection cannot be opened) never goes on
// allocating under a tag whose lease ran out.
TEST_F(PostgresRangeStoreTest, RenewalGoesOnWhileReadsAreHeldBack) {
  ReadBatchGate gate;
  PostgresRangeStoreOptions options = RenewingX();
  gate.InstallIn(options);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  std::promise<void> listed;
  (*store)->ListAsync("", 10,
                      [&](absl::StatusOr<std::vector<NamedCollectionState>>) {
                        listed.set_value();
                      });
  gate.WaitUntilHeld();  // the read queue is stuck from here on
  ASSERT_THAT(ShortenClaimOfX(), IsOk());
  PostgresSession session(uri_);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool in_time = false;
  while (!(in_time = session.Query(kXRenewed) == "t") &&
         absl::Now() < deadline) {
    std::this_thread::yield();
  }
  gate.Release();
  listed.get_future().wait();
  EXPECT_TRUE(in_time) << "the lease was not renewed while reads were stuck";
}

TEST_F(PostgresRangeStoreTest, BadNodeTagLeasesAreInvalidArgument) {
  EXPECT_THAT(OpenWithTags({}, "h"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(OpenWithTags({"X"}, ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(OpenWithTags({"x-1"}, "h"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PostgresRangeStoreOptions options = WithTags({"X"}, "h");
  options.node_tag_lease->duration = options.probe_interval;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("would run out between two renewals")));
}

// Reachability follows the write connection: a read that succeeds while
// that connection is lost reports nothing, and the next write, which
// connects again, reports the database reachable.
TEST_F(PostgresRangeStoreTest, ReadsNeverReportABrokenWriterReachable) {
  std::atomic<bool> cut{false};
  std::atomic<int> downs{0}, ups{0};
  PostgresRangeStoreOptions options = StoreOptions();
  options.probe_interval = absl::Hours(1);  // no probe during the test
  options.on_reachability = [&](bool reachable) {
    ++(reachable ? ups : downs);
  };
  options.after_commit_sent_for_testing = [&](int socket) {
    if (!cut.exchange(false)) return;
    CutConnection(socket);  // the write connection is lost
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  cut = true;
  EXPECT_THAT((*store)->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("outcome of the commit")));
  ASSERT_FALSE((*store)->reachable());

  // On the read connection, which works.
  EXPECT_THAT((*store)->Get("orders"), IsOk());
  EXPECT_FALSE((*store)->reachable());
  EXPECT_EQ(ups.load(), 0);
  EXPECT_EQ(downs.load(), 1);

  ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  EXPECT_TRUE((*store)->reachable());
  EXPECT_EQ(ups.load(), 1);
  EXPECT_EQ(downs.load(), 1);
}

// The probe counts the rows on the read connection while writes go on: a
// count taken before a collection was created is not stored over the
// count that creation brought.
TEST_F(PostgresRangeStoreTest, ProbeCountNeverOverwritesANewerCount) {
  testing_util::Notification first_counted, first_stored_may_go, second_counted,
      second_stored_may_go;
  std::atomic<int> counts{0};
  PostgresRangeStoreOptions options = StoreOptions();
  options.probe_interval = absl::Milliseconds(10);
  options.before_count_stored_for_testing = [&] {
    const int count = ++counts;
    if (count == 1) {
      first_counted.Notify();
      first_stored_may_go.WaitForNotification();
    } else if (count == 2) {
      second_counted.Notify();
      second_stored_may_go.WaitForNotification();
    }
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  // Before the store closes, whatever failed: it waits for the probes.
  absl::Cleanup release = [&] {
    first_stored_may_go.Notify();
    second_stored_may_go.Notify();
  };
  first_counted.WaitForNotification();  // no rows, not stored yet
  ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  EXPECT_EQ((*store)->collection_count(), 1);
  first_stored_may_go.Notify();
  // Probes run one at a time: the first one's batch is over.
  second_counted.WaitForNotification();
  EXPECT_EQ((*store)->collection_count(), 1);
}

// A database of the test's own: stopped and started again.
// Issue 36 item 4: any role that may connect can fill the database's shared
// lock table with advisory locks; every creation then fails with SQLSTATE
// 53200. The store answers UNAVAILABLE saying so (no address), and stops
// being reachable (health NOT_SERVING) until a commit goes through again.
// On a PostgreSQL of its own: the lock table is the whole cluster's.
TEST(PostgresRangeStoreFaultTest, FullLockTableIsUnavailableAndNotServing) {
  absl::StatusOr<std::unique_ptr<PostgresInstance>> postgres =
      PostgresInstance::Start();
  ASSERT_THAT(postgres, IsOk());
  PostgresRangeStoreOptions options;
  options.uri = (*postgres)->uri();
  // No probe: only the calls below move reachable().
  options.probe_interval = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->Allocate("warm", 32, 0, NextToken()), IsOk());
  ASSERT_TRUE((*store)->reachable());
  PostgresSession filler((*postgres)->uri());
  // Session-level advisory locks until the table is full; a rollback of
  // the block keeps them (they ignore transactions).
  filler.Query(
      "DO $$ BEGIN FOR i IN 1..100000000 LOOP PERFORM "
      "pg_advisory_lock(4000000000 + i); END LOOP; EXCEPTION WHEN "
      "out_of_memory THEN NULL; END $$");
  absl::StatusOr<Range> refused =
      (*store)->Allocate("victim", 32, 0, NextToken());
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable,
                                AllOf(HasSubstr("lock table is full"),
                                      HasSubstr("SQLSTATE 53200"),
                                      Not(HasSubstr("127.0.0.1")))));
  EXPECT_FALSE((*store)->reachable());
  // A store that only probes (every 50 ms) sees it too, within a bound.
  PostgresRangeStoreOptions probing;
  probing.uri = (*postgres)->uri();
  probing.probe_interval = absl::Milliseconds(50);
  filler.Query("SELECT pg_advisory_unlock_all()");
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> prober =
      PostgresRangeStore::Open(std::move(probing));
  ASSERT_THAT(prober, IsOk());
  filler.Query(
      "DO $$ BEGIN FOR i IN 1..100000000 LOOP PERFORM "
      "pg_advisory_lock(4000000000 + i); END LOOP; EXCEPTION WHEN "
      "out_of_memory THEN NULL; END $$");
  const auto bound =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*prober)->reachable() && std::chrono::steady_clock::now() < bound) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE((*prober)->reachable());
  filler.Query("SELECT pg_advisory_unlock_all()");
  absl::StatusOr<Range> served =
      (*store)->Allocate("victim", 32, 0, NextToken());
  ASSERT_THAT(served, IsOk());
  EXPECT_EQ(*served, (Range{1, 32}));
  EXPECT_TRUE((*store)->reachable());
}

TEST(PostgresRangeStoreFaultTest, StoppedDatabaseIsUnavailableThenRecovers) {
  absl::StatusOr<std::unique_ptr<PostgresInstance>> postgres =
      PostgresInstance::Start();
  ASSERT_THAT(postgres, IsOk());
  std::atomic<int> downs{0}, ups{0};
  std::mutex mu;
  std::vector<std::string> logged;
  PostgresRangeStoreOptions options;
  options.uri = (*postgres)->uri();
  options.on_reachability = [&](bool reachable) {
    ++(reachable ? ups : downs);
  };
  options.on_database_error = [&](const absl::Status& detail) {
    std::lock_guard<std::mutex> lock(mu);
    logged.push_back(std::string(detail.message()));
  };
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));

  ASSERT_THAT((*postgres)->Stop("immediate"), IsOk());
  for (int i = 0; i < 2; ++i) {  // the broken connection, then a refused one
    absl::StatusOr<Range> r = (*store)->Allocate("orders", 32, 0, NextToken());
    // The caller learns the code and a short reason; the database's
    // address and message are for the log alone.
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable,
                            AllOf(HasSubstr("shared database is unavailable"),
                                  Not(HasSubstr("postgresql://")),
                                  Not(HasSubstr("127.0.0.1")))))
        << i;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(logged.size(), 2u);
    for (const std::string& detail : logged) {
      EXPECT_THAT(detail, HasSubstr("PostgreSQL at postgresql://postgres@"
                                    "127.0.0.1:"));
    }
  }
  EXPECT_FALSE((*store)->reachable());
  EXPECT_EQ(downs.load(), 1);

  ASSERT_THAT((*postgres)->Restart(), IsOk());
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_TRUE((*store)->reachable());
  EXPECT_EQ(ups.load(), 1);
}

}  // namespace
}  // namespace hilo
