// PostgresBatchRunner on the suite's real PostgreSQL: one batch's protocol
// (read and lock the rows, take creation locks, judge, write, COMMIT,
// answer), driven without a store or a queue. What it must keep (the
// contract of range_store.h and postgres_range_store.h): exact ranges; a
// refused request fails alone and changes nothing; a failed write or
// COMMIT fails every write of the batch and stores nothing; an operation on
// a row another session holds is set aside, not waited for.
#include "service/store/postgres/postgres_batch_runner.h"

#include <libpq-fe.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/postgres/postgres_row_codec.h"
#include "service/store/postgres/postgres_schema.h"
#include "service/store/range_token.h"
#include "testing/postgres_schema_fixture.h"
#include "testing/postgres_session.h"
#include "testing/status_matchers.h"

namespace hilo::internal {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::PostgresSchemaTest;
using ::hilo::testing_util::PostgresSession;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;
using Kind = PostgresRequest::Kind;

std::unique_ptr<PostgresRequest> Allocate(
    const std::string& name, int64_t size, int64_t floor = 0,
    int64_t max_floor_jump = kNoFloorJumpLimit, bool may_create = true) {
  auto r = std::make_unique<PostgresRequest>();
  r->kind = Kind::kAllocate;
  r->name = name;
  r->size = size;
  r->floor = floor;
  r->max_floor_jump = max_floor_jump;
  r->may_create = may_create;
  r->token = 1000 + size;
  return r;
}

std::unique_ptr<PostgresRequest> Request(Kind kind, const std::string& name) {
  auto r = std::make_unique<PostgresRequest>();
  r->kind = kind;
  r->name = name;
  return r;
}

class PostgresBatchRunnerTest : public PostgresSchemaTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PostgresSchemaTest::SetUp());
    absl::StatusOr<std::unique_ptr<PostgresConnection>> c = Connect();
    ASSERT_THAT(c, IsOk());
    ASSERT_THAT(CreateOrCheckPostgresSchema(**c, "the test's database"),
                IsOk());
    session_ = std::make_unique<PostgresSession>(uri_);
  }

  absl::StatusOr<std::unique_ptr<PostgresConnection>> Connect() const {
    return PostgresConnection::Open({.uri = uri_}, "the test's database");
  }

  // A write connection's runner on this test's schema.
  std::unique_ptr<PostgresBatchRunner> NewRunner(
      PostgresBatchRunner::Options options = {}) {
    options.description = "the test's database";
    options.on_database_error = [this](const absl::Status& detail) {
      errors_.push_back(detail);
    };
    PostgresBatchRunner::Hooks hooks;
    hooks.connect = [this] { return Connect(); };
    hooks.reachable = [this](bool up) { reachable_.push_back(up); };
    hooks.park = [this](std::unique_ptr<PostgresRequest> r, bool postponed) {
      parked_.push_back(std::move(r));
      postponed_.push_back(postponed);
    };
    hooks.count = &count_;
    return std::make_unique<PostgresBatchRunner>(std::move(options),
                                                 std::move(hooks));
  }

  // Runs `batch` as one GroupCommit batch.
  static void Run(PostgresBatchRunner& runner,
                  const std::vector<std::unique_ptr<PostgresRequest>>& batch) {
    std::vector<GroupCommit::Operation*> ops;
    for (const auto& r : batch) ops.push_back(r.get());
    runner.Run(ops);
  }

  // Gives `name` a row, Max `size`, in a batch of its own.
  static void Create(PostgresBatchRunner& runner, const std::string& name,
                     int64_t size) {
    std::vector<std::unique_ptr<PostgresRequest>> batch;
    batch.push_back(Allocate(name, size));
    Run(runner, batch);
    ASSERT_THAT(batch[0]->status, IsOk());
  }

  // The stored Max of `name`, or "" if it has no row.
  std::string StoredMax(const std::string& name) {
    return session_->Query(absl::StrCat(
        "SELECT max FROM hilo_collections WHERE name = convert_to('", name,
        "', 'UTF8')"));
  }
  // Advisory locks held now, by any session, on `name`'s creation lock.
  int CreationLocksHeldOn(const std::string& name) {
    const std::string key = absl::StrCat(
        "(SELECT ",
        CreationLockKey(absl::StrCat("convert_to('", name, "', 'UTF8')")), ")");
    return std::stoi(session_->Query(absl::StrCat(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
        "objsubid = 1 AND classid::bigint = ((",
        key, " >> 32) & 4294967295) AND objid::bigint = (", key,
        " & 4294967295)")));
  }

  std::unique_ptr<PostgresSession> session_;
  PostgresCollectionCount count_;
  std::vector<bool> reachable_;
  std::vector<std::unique_ptr<PostgresRequest>> parked_;
  std::vector<bool> postponed_;
  // The whole of each database error (callers get a short reason).
  std::vector<absl::Status> errors_;
};

TEST_F(PostgresBatchRunnerTest, AllocationsGetExactRangesAndAreCommitted) {
  auto runner = NewRunner();
  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Allocate("a", 10));
  batch.push_back(Allocate("a", 5));
  batch.push_back(Allocate("b", 3, /*floor=*/100));
  batch.push_back(Allocate("none", 3, 0, kNoFloorJumpLimit,
                           /*may_create=*/false));
  Run(*runner, batch);
  ASSERT_THAT(batch[0]->status, IsOk());
  EXPECT_EQ(batch[0]->allocation.range, (Range{1, 10}));
  EXPECT_TRUE(batch[0]->allocation.created);
  ASSERT_THAT(batch[1]->status, IsOk());
  EXPECT_EQ(batch[1]->allocation.range, (Range{11, 15}));
  EXPECT_FALSE(batch[1]->allocation.created);
  ASSERT_THAT(batch[2]->status, IsOk());
  EXPECT_EQ(batch[2]->allocation.range, (Range{101, 103}));
  EXPECT_TRUE(IsNoRowRefusal(batch[3]->status));
  EXPECT_EQ(StoredMax("a"), "15");
  EXPECT_EQ(StoredMax("b"), "103");
  EXPECT_EQ(StoredMax("none"), "");
  EXPECT_EQ(count_.Load(), 2);
  EXPECT_EQ(reachable_, std::vector<bool>({true}));

  // The next batch reads what this one stored.
  std::vector<std::unique_ptr<PostgresRequest>> next;
  next.push_back(Allocate("a", 1));
  Run(*runner, next);
  ASSERT_THAT(next[0]->status, IsOk());
  EXPECT_EQ(next[0]->allocation.range, (Range{16, 16}));
}

TEST_F(PostgresBatchRunnerTest, EachKindIsJudgedAndOnlyChangesAreWritten) {
  auto runner = NewRunner();
  std::vector<std::unique_ptr<PostgresRequest>> setup;
  setup.push_back(Allocate("a", 10));
  setup.push_back(Request(Kind::kPut, "unused"));
  Run(*runner, setup);
  ASSERT_THAT(setup[0]->status, IsOk());
  ASSERT_THAT(setup[1]->status, IsOk());

  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Request(Kind::kReturn, "a"));  // (6, 10] with its token
  batch[0]->end = 10;
  batch[0]->last = 6;
  batch[0]->token = setup[0]->token;
  batch.push_back(Request(Kind::kSetFloor, "f"));
  batch[1]->floor = 500;
  batch.push_back(Request(Kind::kReturnMany, ""));
  batch[2]->items = {{.collection = "a", .end = 6, .last = 6, .token = 0},
                     {.collection = "f", .end = 1, .last = 0, .foreign = true}};
  batch.push_back(Request(Kind::kDelete, "a"));  // numbers are out
  batch.push_back(Request(Kind::kDelete, "unused"));
  batch.push_back(Request(Kind::kDelete, "nothing"));
  batch.push_back(Request(Kind::kGet, "a"));
  Run(*runner, batch);
  ASSERT_THAT(batch[0]->status, IsOk());
  EXPECT_TRUE(batch[0]->returned.applied);
  EXPECT_EQ(batch[0]->returned.max, 6);
  ASSERT_THAT(batch[1]->status, IsOk());
  EXPECT_TRUE(batch[1]->floored.created);
  EXPECT_EQ(batch[1]->floored.max, 500);
  ASSERT_EQ(batch[2]->many.size(), 2u);
  ASSERT_THAT(batch[2]->many[0], IsOk());
  EXPECT_TRUE(batch[2]->many[0]->applied);  // an empty tail, at Max
  ASSERT_THAT(batch[2]->many[1], IsOk());
  EXPECT_EQ(batch[2]->many[1]->max, 500);  // the SetFloor before it
  EXPECT_THAT(batch[3]->status,
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(batch[4]->status, IsOk());
  EXPECT_THAT(batch[5]->status, StatusIs(absl::StatusCode::kNotFound));
  ASSERT_TRUE(batch[6]->state.has_value());
  EXPECT_EQ(batch[6]->state->max, 6);  // as the batch left it
  EXPECT_EQ(StoredMax("a"), "6");
  EXPECT_EQ(StoredMax("f"), "500");
  EXPECT_EQ(StoredMax("unused"), "");
  EXPECT_EQ(count_.Load(), 2);  // a, unused; then f, less unused
}

TEST_F(PostgresBatchRunnerTest, FailedWriteFailsTheWholeBatch) {
  auto runner = NewRunner();
  Create(*runner, "z", 5);
  // Any row past Max 1000 cannot be written.
  session_->Query(
      "ALTER TABLE hilo_collections ADD CONSTRAINT small CHECK (max < 1000)");

  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Allocate("z", 5));     // fine alone
  batch.push_back(Allocate("new", 3));   // fine alone
  batch.push_back(Allocate("y", 2000));  // fails the write
  batch.push_back(Request(Kind::kGet, "z"));
  Run(*runner, batch);
  EXPECT_THAT(batch[0]->status,
              StatusIs(absl::StatusCode::kInternal, HasSubstr("23514")));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_THAT(errors_[0], StatusIs(absl::StatusCode::kInternal,
                                   HasSubstr("writing collections")));
  EXPECT_EQ(batch[1]->status, batch[0]->status);
  EXPECT_EQ(batch[2]->status, batch[0]->status);
  // A read answers what is stored, not what the batch would have written.
  ASSERT_THAT(batch[3]->status, IsOk());
  ASSERT_TRUE(batch[3]->state.has_value());
  EXPECT_EQ(batch[3]->state->max, 5);
  EXPECT_EQ(StoredMax("z"), "5");
  EXPECT_EQ(StoredMax("new"), "");
  EXPECT_EQ(count_.Load(), 1);
}

TEST_F(PostgresBatchRunnerTest, FailedCommitFailsTheWholeBatch) {
  auto runner = NewRunner();
  Create(*runner, "z", 5);
  // Checked at COMMIT only: every write goes through, the COMMIT fails.
  session_->Query(
      "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
      "BEGIN RAISE EXCEPTION 'refused at commit'; END $$");
  session_->Query(
      "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT OR UPDATE ON "
      "hilo_collections DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
      "WHEN (NEW.max > 100) EXECUTE FUNCTION refuse()");

  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Allocate("z", 5));
  batch.push_back(Allocate("big", 200));
  Run(*runner, batch);
  EXPECT_THAT(batch[0]->status,
              StatusIs(absl::StatusCode::kInternal, HasSubstr("P0001")));
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_THAT(errors_[0],
              StatusIs(absl::StatusCode::kInternal, HasSubstr("committing")));
  EXPECT_EQ(batch[1]->status, batch[0]->status);
  EXPECT_EQ(StoredMax("z"), "5");
  EXPECT_EQ(StoredMax("big"), "");
  EXPECT_EQ(count_.Load(), 1);
  // Until a commit goes through again, the database counts as unreachable.
  EXPECT_EQ(reachable_, std::vector<bool>({true, false}));
}

TEST_F(PostgresBatchRunnerTest, HeldRowIsSetAsideWhileTheRestCommits) {
  auto runner = NewRunner();
  Create(*runner, "held", 5);
  PostgresSession holder(uri_);
  holder.Query("BEGIN");
  holder.Query(
      "SELECT max FROM hilo_collections WHERE name = convert_to('held', "
      "'UTF8') FOR UPDATE");

  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Allocate("held", 5));
  batch.push_back(Allocate("free", 2));
  Run(*runner, batch);
  ASSERT_THAT(batch[1]->status, IsOk());
  EXPECT_EQ(batch[1]->allocation.range, (Range{1, 2}));
  // Not run: parked to try again, its wait begun.
  EXPECT_TRUE(batch[0]->deferred);
  ASSERT_EQ(parked_.size(), 1u);
  EXPECT_EQ(parked_[0]->name, "held");
  EXPECT_TRUE(parked_[0]->lock_deadline.has_value());
  EXPECT_EQ(postponed_, std::vector<bool>({false}));
  EXPECT_EQ(runner->counters().set_aside, 1);
  EXPECT_EQ(StoredMax("held"), "5");
  holder.Query("ROLLBACK");
}

// Issue 36, F3: a creation's lock key shows in pg_locks; one the rules
// refuse on its arguments alone (judged on no row) must take no lock, so
// a refused request shows no key. A creation that an earlier request of
// the batch makes possible still takes its lock.
TEST_F(PostgresBatchRunnerTest, RefusedCreationTakesNoLockAndChangesNothing) {
  PostgresBatchRunner::Options options;
  std::vector<int> locks;  // far, past, made, later; while judged
  options.before_judging_for_testing = [&] {
    for (const char* name : {"far", "past", "made", "later"}) {
      locks.push_back(CreationLocksHeldOn(name));
    }
  };
  auto runner = NewRunner(std::move(options));
  constexpr int64_t kTop = std::numeric_limits<int64_t>::max();
  std::vector<std::unique_ptr<PostgresRequest>> batch;
  batch.push_back(Allocate("far", 3, /*floor=*/5000, /*max_floor_jump=*/100));
  batch.push_back(Allocate("past", 5, /*floor=*/kTop - 2));
  batch.push_back(Allocate("made", 4));
  batch.push_back(Request(Kind::kSetFloor, "later"));
  batch[3]->floor = 1'000'000;
  batch.push_back(Allocate("later", 2, /*floor=*/1'000'050, 100));
  Run(*runner, batch);
  EXPECT_THAT(batch[0]->status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("\"far\"")));
  EXPECT_THAT(batch[1]->status,
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("\"past\"")));
  ASSERT_THAT(batch[2]->status, IsOk());
  EXPECT_EQ(batch[2]->allocation.range, (Range{1, 4}));
  ASSERT_THAT(batch[3]->status, IsOk());
  ASSERT_THAT(batch[4]->status, IsOk());
  EXPECT_EQ(batch[4]->allocation.range, (Range{1'000'051, 1'000'052}));
  EXPECT_EQ(locks, std::vector<int>({0, 0, 1, 1}));
  EXPECT_EQ(StoredMax("far"), "");
  EXPECT_EQ(StoredMax("past"), "");
  EXPECT_EQ(StoredMax("made"), "4");
  EXPECT_EQ(StoredMax("later"), "1000052");
  EXPECT_EQ(count_.Load(), 2);
  // The transaction's locks went with its COMMIT.
  EXPECT_EQ(CreationLocksHeldOn("made"), 0);
}

}  // namespace
}  // namespace hilo::internal
