// The PostgreSQL store against a database whose history goes back
// (service/store/postgres/postgres_history.h), on a real server: each
// collection's reservation, a history that changed under the store, and a
// standby that does not confirm. The
// whole failover, with a real standby promoted, is
// tests/postgres/failover_test.py.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/postgres/postgres_range_store.h"
#include "testing/postgres_instance.h"
#include "testing/postgres_schema_fixture.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::Clock;
using ::hilo::ManualClock;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The first column of the first row `sql` gives, through psql.
std::string QueryOne(const std::string& uri, const std::string& sql) {
  std::string out;
  FILE* p = popen(
      absl::StrCat("psql -qXAt '", uri, "' -c \"", sql, "\"").c_str(), "r");
  if (p == nullptr) return "";
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), p) != nullptr) out += buffer;
  pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A physical replication client that flushes what it receives at once
// (pg_receivewal --synchronous) into a directory of its own, from the
// server on `port`: what the primary lists in pg_stat_replication as a
// standby, connected to `host` (an address, or the directory of the
// server's socket). Killed when it goes.
class Receiver {
 public:
  explicit Receiver(const std::string& port,
                    const std::string& host = "127.0.0.1")
      : pid_(fork()) {
    if (pid_ == 0) {
      execl("/usr/lib/postgresql/15/bin/pg_receivewal", "pg_receivewal", "-h",
            host.c_str(), "-p", port.c_str(), "-U", "postgres", "-D",
            wal_.path().c_str(), "--synchronous", "--no-loop", "-n",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Receiver() { Kill(); }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  bool started() const { return pid_ > 0; }
  // SIGSTOP stops it confirming, SIGCONT lets it go on; true if sent.
  bool Signal(int signal) { return pid_ > 0 && kill(pid_, signal) == 0; }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  TempDir wal_;
  pid_t pid_;
};

// Whether, within 30 seconds, `sql` on `uri` answers `expected`.
bool WaitForAnswer(const std::string& uri, const std::string& sql,
                   const std::string& expected) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (QueryOne(uri, sql) != expected) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Whether, within 30 seconds, the primary at `uri` lists `standbys`
// streaming (pg_receivewal counts as one).
bool WaitForStreaming(const std::string& uri, int standbys) {
  return WaitForAnswer(uri,
                       "SELECT count(*) FROM pg_stat_replication WHERE "
                       "state = 'streaming'",
                       absl::StrCat(standbys));
}

// The port of a URI postgresql://USER@127.0.0.1:PORT/DB.
std::string PortOf(const std::string& uri) {
  const std::vector<std::string> parts = absl::StrSplit(uri, ':');
  if (parts.size() != 3) return "";
  return parts[2].substr(0, parts[2].find('/'));
}

// The ceiling of `collection`'s row on the store at `uri`.
std::string StoredCeiling(const std::string& uri,
                          const std::string& collection) {
  return QueryOne(uri, absl::StrCat("SELECT ceiling FROM hilo_collections "
                                    "WHERE name = '",
                                    collection, "'::bytea"));
}

class PostgresHistoryTest : public testing_util::PostgresSchemaTest {
 protected:
  // `windows_clock` null: the monotonic clock.
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> Open(
      const Clock* windows_clock = nullptr,
      size_t max_remembered_collections =
          PostgresRangeStoreOptions().max_remembered_collections) {
    PostgresRangeStoreOptions options = StoreOptions();
    options.windows_clock = windows_clock;
    options.max_remembered_collections = max_remembered_collections;
    options.on_history_went_back = [this](const StoreHistoryEvent& e) {
      events_.push_back(e);
    };
    return PostgresRangeStore::Open(std::move(options));
  }

  std::string Ceiling(const std::string& collection) {
    return StoredCeiling(uri_, collection);
  }

  // The schema version hilo_meta records.
  std::string SchemaVersion() {
    return QueryOne(uri_,
                    "SELECT value FROM hilo_meta WHERE key = 'schema_version'");
  }

  // Takes [1, 32] of "orders" and [1, 10] of "users" on a store of its
  // own, closed again.
  void ServeOrdersAndUsers() {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
    ASSERT_EQ((*store)->Allocate("users", 10, 0, NextToken()).value(),
              (Range{1, 10}));
  }

  std::vector<StoreHistoryEvent> events_;  // on the store's thread; read
                                           // after the call that told it
};

// What hilo_meta records of a standby seen on the store at `uri`: its
// value, or "" if nothing.
std::string StandbySeen(const std::string& uri) {
  return QueryOne(uri,
                  "SELECT value FROM hilo_meta WHERE key = 'standby_seen'");
}

TEST(DescribePostgresConnectionTest, NamesEachHostWithItsOwnPort) {
  EXPECT_EQ(
      DescribePostgresConnection("postgresql://hilo@10.0.0.1,10.0.0.2:6543/ids?"
                                 "target_session_attrs=read-write")
          .value(),
      "postgresql://hilo@10.0.0.1:5432,10.0.0.2:6543/ids");
  EXPECT_EQ(DescribePostgresConnection(
                "host=a,b port=5433,5434 user=u dbname=d password=secret")
                .value(),
            "postgresql://u@a:5433,b:5434/d");
  EXPECT_EQ(DescribePostgresConnection("host=a,b port=5433 user=u").value(),
            "postgresql://u@a:5433,b:5433/u");
}

// The first range reserves 16 ranges of its size past itself; the ranges
// after it stay inside that reservation and move nothing.
TEST_F(PostgresHistoryTest, RangeReservesSixteenRangesPastItself) {
  ManualClock clock(absl::FromUnixSeconds(1'800'000'000));
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open(&clock);
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ(Ceiling("orders"), "544");
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ(Ceiling("orders"), "544");
  // A floor is reserved past as well: lost, it would let numbers an
  // import used come back. (The reservation before it lasted long enough
  // to keep the reach at 16.)
  clock.Advance(absl::Seconds(2));
  ASSERT_THAT((*store)->SetFloor("orders", 1000), IsOk());
  EXPECT_EQ(Ceiling("orders"), "1016");
  EXPECT_TRUE(events_.empty());
}

// A database that never had a standby: only a range past the reservation
// waits (trivially) for standbys; the ranges inside it cost no round trip
// more than their commit.
TEST_F(PostgresHistoryTest, WithoutStandbysOnlyNewReservationsWait) {
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ((*store)->counters().standby_waits, 1);
  for (int64_t low = 33; low < 544; low += 32) {
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{low, low + 31}));
  }
  EXPECT_EQ((*store)->counters().standby_waits, 1);
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{545, 576}));
  EXPECT_EQ((*store)->counters().standby_waits, 2);
}

// A reservation that runs out within a second is followed by one that
// reaches twice as far, up to 4,096 times the first (16 ranges); one that
// lasted more than 16 seconds, by one half as far; one in between, by one
// as far. Floors reserve ranges of one number, so each ceiling is the
// floor plus the reach.
TEST_F(PostgresHistoryTest, ReservationsThatRunOutFastReachFarther) {
  ManualClock clock(absl::FromUnixSeconds(1'800'000'000));
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open(&clock);
  ASSERT_THAT(store, IsOk());
  int64_t floor = 1000;
  int64_t reach = 16;
  for (int i = 0; i < 14; ++i) {
    ASSERT_THAT((*store)->SetFloor("orders", floor), IsOk());
    ASSERT_EQ(Ceiling("orders"), absl::StrCat(floor + reach))
        << "reservation " << i;
    floor += reach + 1;
    if (i < 12) reach *= 2;  // 16 << 12 = 65,536 is the most
  }
  EXPECT_EQ((*store)->counters().standby_waits, 14);
  clock.Advance(absl::Seconds(2));
  ASSERT_THAT((*store)->SetFloor("orders", floor), IsOk());
  EXPECT_EQ(Ceiling("orders"), absl::StrCat(floor + 65'536));
  floor += 65'537;
  clock.Advance(absl::Seconds(17));
  ASSERT_THAT((*store)->SetFloor("orders", floor), IsOk());
  EXPECT_EQ(Ceiling("orders"), absl::StrCat(floor + 32'768));

  // Ranges reserve ranges of their own size: 16 past the first, 32 past
  // the one that ran out of the first reservation at once. Inside a
  // reservation nothing waits.
  ASSERT_EQ((*store)->Allocate("users", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ(Ceiling("users"), "544");
  for (int64_t low = 33; low < 544; low += 32) {
    ASSERT_EQ((*store)->Allocate("users", 32, 0, NextToken()).value(),
              (Range{low, low + 31}));
  }
  ASSERT_EQ((*store)->Allocate("users", 32, 0, NextToken()).value(),
            (Range{545, 576}));
  EXPECT_EQ(Ceiling("users"), absl::StrCat(576 + 32 * 32));
  EXPECT_EQ((*store)->counters().standby_waits, 18);
  EXPECT_TRUE(events_.empty());
}

// The server remembers what the standbys confirmed and how far each
// collection reserves for at most max_remembered_collections names; past
// that it forgets them all, so names that come and go cannot grow its
// memory. Forgetting costs a wait and a shorter reach, never a number.
TEST_F(PostgresHistoryTest, RemembersReservationsOfBoundedlyManyCollections) {
  ManualClock clock(absl::FromUnixSeconds(1'800'000'000));
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      Open(&clock, /*max_remembered_collections=*/2);
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->SetFloor("a", 1000), IsOk());
  EXPECT_EQ(Ceiling("a"), "1016");
  ASSERT_THAT((*store)->SetFloor("a", 1017), IsOk());
  EXPECT_EQ(Ceiling("a"), "1049");  // ran out at once: twice the reach
  ASSERT_EQ((*store)->Allocate("b", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ((*store)->counters().standby_waits, 3);
  // Inside their confirmed reservations, "a" and "b" wait for nothing.
  ASSERT_THAT((*store)->SetFloor("a", 1020), IsOk());
  ASSERT_EQ((*store)->Allocate("b", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ((*store)->counters().standby_waits, 3);

  // A third name: both are forgotten.
  ASSERT_EQ((*store)->Allocate("c", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ((*store)->counters().standby_waits, 4);
  ASSERT_EQ((*store)->Allocate("b", 32, 0, NextToken()).value(),
            (Range{65, 96}));
  EXPECT_EQ((*store)->counters().standby_waits, 5);
  EXPECT_EQ(Ceiling("b"), "544");  // still inside its reservation
  ASSERT_THAT((*store)->SetFloor("a", 1050), IsOk());
  EXPECT_EQ(Ceiling("a"), "1066");  // the first reach again, not 64
  EXPECT_EQ((*store)->counters().standby_waits, 6);
  EXPECT_TRUE(events_.empty());
}

// What a promoted standby or a restore looks like to the store: hilo_meta
// records another history, and the rows lack the last commits (Max went
// back). Before anything is handed out, every collection starts above its
// reservation.
TEST_F(PostgresHistoryTest, AnotherHistoryMovesEveryCollectionOnToItsCeiling) {
  ASSERT_NO_FATAL_FAILURE(ServeOrdersAndUsers());
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "UPDATE hilo_meta SET value = '999' WHERE key = 'timeline'; "
                  "UPDATE hilo_collections SET max = 0, return_floor = 0 "
                  "WHERE name = 'orders'::bytea; "
                  "INSERT INTO hilo_collections VALUES ('legacy'::bytea, 7, "
                  "7, 0, 0, 0, 0, 0)"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_THAT(events_[0].reason, HasSubstr("timeline 999 to system"));
  EXPECT_EQ(events_[0].collections, 2);  // not "legacy": no reservation
  EXPECT_EQ(events_[0].numbers_skipped, 544 + (170 - 10));
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{545, 576}));
  EXPECT_EQ((*store)->Allocate("users", 10, 0, NextToken()).value(),
            (Range{171, 180}));
  EXPECT_EQ((*store)->Allocate("legacy", 10, 0, NextToken()).value(),
            (Range{8, 17}));
  // Recorded: the next store finds the history as it is.
  events_.clear();
  store->reset();
  ASSERT_THAT(Open(), IsOk());
  EXPECT_TRUE(events_.empty());
}

// A recorded timeline that does not read as a number is not trusted, even
// when it begins with the live timeline's digits: the store moves on.
TEST_F(PostgresHistoryTest, ARecordedTimelineThatIsNotANumberMovesOn) {
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  const std::string live =
      QueryOne(uri_, "SELECT value FROM hilo_meta WHERE key = 'timeline'");
  ASSERT_FALSE(live.empty());
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_, absl::StrCat("UPDATE hilo_meta SET value = '", live,
                                     "x' WHERE key = 'timeline'")),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{545, 576}));
}

// hilo writes the record's two rows in one statement, and the timeline as
// a plain number: a record with one row gone, an empty identifier or a
// padded timeline was changed by someone else and is not trusted either
// (once, a half record read as nothing recorded and " 1" as timeline 1, so
// a database so changed and then restored handed out its numbers again).
TEST_F(PostgresHistoryTest, ARecordHiloDidNotWriteWholeMovesOn) {
  const char* const kTamperings[] = {
      "DELETE FROM hilo_meta WHERE key = 'timeline'",
      "DELETE FROM hilo_meta WHERE key = 'system_identifier'",
      "UPDATE hilo_meta SET value = '' WHERE key = 'system_identifier'",
      // The live timeline still, but not as hilo writes a number.
      "UPDATE hilo_meta SET value = ' ' || value WHERE key = 'timeline'",
      "UPDATE hilo_meta SET value = '+' || value WHERE key = 'timeline'",
      "UPDATE hilo_meta SET value = '0' || value WHERE key = 'timeline'",
  };
  int64_t next = 1;  // the low the next range would have without a move
  for (const char* tampering : kTamperings) {
    SCOPED_TRACE(tampering);
    {
      absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
      ASSERT_THAT(store, IsOk());
      const Range range =
          (*store)->Allocate("orders", 32, 0, NextToken()).value();
      ASSERT_EQ(range.low, next);
      next = range.high + 1;
    }
    ASSERT_THAT(PostgresInstance::Execute(uri_, tampering), IsOk());
    events_.clear();
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    EXPECT_EQ(events_.size(), 1u) << "no history change reported";
    const Range range =
        (*store)->Allocate("orders", 32, 0, NextToken()).value();
    EXPECT_GT(range.low, next) << "started inside the last reservation";
    next = range.high + 1;
  }
}

// A changed history is most often a standby promoted, and the old primary
// comes back as a standby: the store records that one was seen (the primary
// that recorded it may have failed before passing the record on), so a
// reservation confirmed with none listed is not remembered, by this server
// or any other.
TEST_F(PostgresHistoryTest, AnotherHistoryRecordsThatAStandbyWasSeen) {
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  EXPECT_EQ(StandbySeen(uri_), "");
  ASSERT_THAT(
      PostgresInstance::Execute(
          uri_, "UPDATE hilo_meta SET value = '999' WHERE key = 'timeline'"),
      IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_THAT(StandbySeen(uri_),
              HasSubstr("the history changed from system identifier"));
  // Past the reservation, then inside it: each waits, none is remembered.
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{545, 576}));
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{577, 608}));
  EXPECT_EQ((*store)->counters().standby_waits, 2);
}

// An operator who removed replication for good deletes the record: the
// servers running take the fast path again at their next wait, with no
// restart.
TEST_F(PostgresHistoryTest, DeletingTheRecordOfAStandbyBringsBackTheFastPath) {
  ASSERT_THAT(Open(), IsOk());
  ASSERT_THAT(
      PostgresInstance::Execute(
          uri_, "INSERT INTO hilo_meta VALUES ('standby_seen', 'a test')"),
      IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ((*store)->counters().standby_waits, 2);
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_, "DELETE FROM hilo_meta WHERE key = 'standby_seen'"),
              IsOk());
  // This one still waits (its reservation was not remembered); it is, and
  // the ranges after it inside the reservation are answered at commit.
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{65, 96}));
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{97, 128}));
  EXPECT_EQ((*store)->counters().standby_waits, 3);
  EXPECT_EQ(StandbySeen(uri_), "");
}

// A promoted standby whose row stops exactly at its
// ceiling (the 16th range inside a reservation ends on it) is not moved
// on, so its tokens are not retired. On the old primary the last range's
// tail was returned and handed out again at commit (inside the confirmed
// reservation); those commits are lost. The return's reply was lost too,
// and the client retries it on the new primary: it applies, and the new
// primary hands [521, 536] out a second time.
TEST_F(PostgresHistoryTest, AReturnRetriedAfterTheHistoryChangedDoesNotApply) {
  uint64_t last = 0;
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
    for (int64_t low = 33; low < 513; low += 32) {
      ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
                (Range{low, low + 31}));
    }
    last = NextToken();
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, last).value(),
              (Range{513, 544}));
    ASSERT_EQ(Ceiling("orders"), "544");
    // What the standby received.
    ASSERT_THAT(
        PostgresInstance::Execute(uri_,
                                  "CREATE TABLE standby_copy AS SELECT * FROM "
                                  "hilo_collections"),
        IsOk());
    // Lost with the old primary: the return and the range after it.
    ASSERT_TRUE((*store)->Return("orders", 544, 520, last)->applied);
    ASSERT_EQ((*store)->Allocate("orders", 16, 0, NextToken()).value(),
              (Range{521, 536}));
  }
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "DELETE FROM hilo_collections; INSERT INTO hilo_collections "
                  "SELECT * FROM standby_copy; DROP TABLE standby_copy; "
                  "UPDATE hilo_meta SET value = '999' WHERE key = 'timeline'"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_FALSE((*store)->Return("orders", 544, 520, last)->applied);
  const Range next = (*store)->Allocate("orders", 16, 0, NextToken()).value();
  EXPECT_GT(next.low, 536);
}

// Schema version 5 had no record of a standby seen; version 6 does, and a
// server of version 5 would ignore it, so the upgrade marks the schema as
// the version of this server (7). The collections go on where they were;
// with no standby ever, nothing is recorded and the fast path stays.
TEST_F(PostgresHistoryTest, SchemaVersionFiveIsMigrated) {
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
    ASSERT_THAT(store, IsOk());
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  ASSERT_THAT(PostgresInstance::Execute(uri_,
                                        "UPDATE hilo_meta SET value = '5' "
                                        "WHERE key = 'schema_version'"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ(SchemaVersion(), "7");
  EXPECT_EQ(StandbySeen(uri_), "");
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{65, 96}));
  EXPECT_EQ((*store)->counters().standby_waits, 1);
  EXPECT_TRUE(events_.empty());
}

// Schema version 6 had no incarnation per row; the upgrade gives every
// row one of its own, and keeps its Max and ceiling, so ranges go on from
// Max. A server of version 6 still running inserts rows naming only the
// columns it knows: the column's default gives those one too.
TEST_F(PostgresHistoryTest, SchemaVersionSixIsMigratedToSeven) {
  ASSERT_NO_FATAL_FAILURE(ServeOrdersAndUsers());
  // What a server of version 6 left.
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "ALTER TABLE hilo_collections DROP COLUMN incarnation; "
                  "UPDATE hilo_meta SET value = '6' WHERE key = "
                  "'schema_version'"),
              IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ(SchemaVersion(), "7");
  const std::string rows =
      "SELECT string_agg(max || ' ' || ceiling, ', ' ORDER BY name), "
      "count(DISTINCT incarnation), bool_and(incarnation >= 0) FROM "
      "hilo_collections";
  // Each the only making of its name so far: 0, added without a rewrite.
  EXPECT_EQ(QueryOne(uri_, rows), "32 544, 10 170|1|t");
  const std::string orders_incarnation =
      "SELECT incarnation FROM hilo_collections WHERE name = 'orders'::bytea";
  const std::string before = QueryOne(uri_, orders_incarnation);
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ((*store)->Allocate("users", 10, 0, NextToken()).value(),
            (Range{11, 20}));
  EXPECT_EQ(QueryOne(uri_, orders_incarnation), before);
  ASSERT_THAT(
      PostgresInstance::Execute(
          uri_,
          "INSERT INTO hilo_collections (name, max, return_floor, "
          "updated_at_us, range_token, previous_token, previous_return_floor, "
          "ceiling) VALUES ('legacy'::bytea, 7, 7, 0, 0, 0, 0, 0)"),
      IsOk());
  EXPECT_EQ(QueryOne(uri_,
                     "SELECT count(DISTINCT incarnation) FROM "
                     "hilo_collections"),
            "2");
  EXPECT_EQ((*store)->Allocate("legacy", 10, 0, NextToken()).value(),
            (Range{8, 17}));
  EXPECT_TRUE(events_.empty());
}

// Migrating to schema 7 takes no longer on a large table than on a small
// one: every statement is bounded (statement_timeout, 5 s by default, no
// flag), so a migration that rewrote the table (a volatile default drawn
// for every row: 3.4 s for a million rows on the 2-core test machine) would
// fail at every start on a large enough store, and no server of version 7
// could ever start on it. Whether the table was rewritten is read from
// its file node, not from a time, so a busy machine cannot fail the test.
TEST_F(PostgresHistoryTest, SchemaVersionSixIsMigratedWithoutARewrite) {
  ASSERT_NO_FATAL_FAILURE(ServeOrdersAndUsers());
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "ALTER TABLE hilo_collections DROP COLUMN incarnation; "
                  "UPDATE hilo_meta SET value = '6' WHERE key = "
                  "'schema_version'; "
                  "INSERT INTO hilo_collections (name, max, return_floor, "
                  "updated_at_us, range_token, previous_token, "
                  "previous_return_floor, ceiling) SELECT "
                  "convert_to('c' || g, 'UTF8'), g, g, 0, 0, 0, 0, g "
                  "FROM generate_series(1, 1000) g"),
              IsOk());
  // A table rewritten is a new file: its file node changes, whatever the
  // time the rewrite took.
  const std::string kFileNode =
      "SELECT pg_relation_filenode('hilo_collections')";
  const std::string before = QueryOne(uri_, kFileNode);
  ASSERT_NE(before, "");
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store = Open();
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ(SchemaVersion(), "7");
  EXPECT_EQ(QueryOne(uri_, kFileNode), before) << "the table was rewritten";
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
}

// A store put back to before a migration (a point-in-time restore to before
// the upgrade, or a standby promoted without the migration's commit) under
// a running server: its new connection finds another history, moves the
// collections on, and must find the schema as it is too, migrating it
// again, rather than fail every call on a column the table lacks until the
// server is restarted.
TEST_F(PostgresHistoryTest, AStorePutBackBeforeTheMigrationIsMigratedAgain) {
  // The store's sessions carry a name of their own: the tests running
  // beside this one share its database, and their sessions must live.
  const std::string name = absl::StrCat("hilo_put_back_", getpid());
  PostgresRangeStoreOptions options = StoreOptions();
  options.uri = absl::StrCat(uri_, "&application_name=", name);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(std::move(options));
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_THAT(PostgresInstance::Execute(
                  uri_,
                  "ALTER TABLE hilo_collections DROP COLUMN incarnation; "
                  "UPDATE hilo_meta SET value = '6' WHERE key = "
                  "'schema_version'; "
                  "UPDATE hilo_meta SET value = '999' WHERE key = 'timeline'"),
              IsOk());
  std::string ended;
  ASSERT_THAT(
      PostgresInstance::Execute(uri_,
                                "SELECT count(pg_terminate_backend(pid)) FROM "
                                "pg_stat_activity WHERE application_name = '" +
                                    name + "'",
                                &ended),
      IsOk());
  ASSERT_NE(ended, "0") << "no session of the store was ended";
  // The first call may find its connection gone; the next connects anew.
  absl::StatusOr<Range> range;
  for (int call = 0; call < 3; ++call) {
    range = (*store)->Allocate("orders", 32, 0, NextToken());
    if (range.ok()) break;
  }
  ASSERT_THAT(range, IsOk());
  EXPECT_EQ(*range, (Range{545, 576}));
  EXPECT_EQ(SchemaVersion(), "7");
}

// A cluster of its own, whose standbys a test starts and stops: every other
// test's reservations would wait for them too.
class PostgresStandbyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PostgresInstance>> postgres =
        PostgresInstance::Start();
    ASSERT_THAT(postgres, IsOk());
    postgres_ = *std::move(postgres);
    uri_ = postgres_->uri();
    port_ = PortOf(uri_);
    ASSERT_FALSE(port_.empty()) << uri_;
  }

  // A receiver connected to `host` the primary lists as streaming, the
  // `streaming`th; null, failing the test, if it is not listed within 30
  // seconds.
  std::unique_ptr<Receiver> Stream(const std::string& host = "127.0.0.1",
                                   int streaming = 1) {
    auto receiver = std::make_unique<Receiver>(port_, host);
    if (!receiver->started() || !WaitForStreaming(uri_, streaming)) {
      ADD_FAILURE() << "pg_receivewal did not connect";
      return nullptr;
    }
    return receiver;
  }

  // Kills `receiver`; whether the primary then lists no standby at all
  // within 30 seconds.
  bool Gone(Receiver& receiver) {
    receiver.Kill();
    return WaitForAnswer(uri_, "SELECT count(*) FROM pg_stat_replication", "0");
  }

  // A standby attaches and stops confirming: `store`'s range [low, low+31]
  // of "orders", inside a reservation the standby does not have, is not
  // handed out (its numbers are skipped); once the standby goes on, the
  // next range is, and the one after it is answered at commit.
  void ExpectRangesWaitForAStandbyAttaching(PostgresRangeStore& store,
                                            int64_t low) {
    std::unique_ptr<Receiver> standby = Stream();
    ASSERT_NE(standby, nullptr);
    ASSERT_TRUE(standby->Signal(SIGSTOP));
    EXPECT_THAT(store.Allocate("orders", 32, 0, NextToken()),
                StatusIs(absl::StatusCode::kUnavailable));
    ASSERT_TRUE(standby->Signal(SIGCONT));
    EXPECT_EQ(store.Allocate("orders", 32, 0, NextToken()).value(),
              (Range{low + 32, low + 63}));
    const int64_t waits = store.counters().standby_waits;
    EXPECT_EQ(store.Allocate("orders", 32, 0, NextToken()).value(),
              (Range{low + 64, low + 95}));
    EXPECT_EQ(store.counters().standby_waits, waits);
  }

  // A store's options on this cluster, waiting 300 ms for the standbys.
  PostgresRangeStoreOptions StoreOptions() const {
    PostgresRangeStoreOptions options;
    options.uri = uri_;
    options.standby_wait = absl::Milliseconds(300);
    return options;
  }

  // StoreOptions() whose database errors, what the server's log gets, go
  // to *logged.
  PostgresRangeStoreOptions LoggedOptions(
      std::vector<std::string>* logged) const {
    PostgresRangeStoreOptions options = StoreOptions();
    options.on_database_error = [logged](const absl::Status& s) {
      logged->emplace_back(s.message());
    };
    return options;
  }

  // One more server on this cluster; null, failing the test, if it does
  // not open.
  std::unique_ptr<PostgresRangeStore> Server() const {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
        PostgresRangeStore::Open(StoreOptions());
    if (!store.ok()) {
      ADD_FAILURE() << store.status();
      return nullptr;
    }
    return *std::move(store);
  }

  // `a` saw "orders" confirmed up to its ceiling, 544, and `b` removed the
  // row since. With `standby` stopped, `b` makes the row anew: its first
  // wait fails, and the new row's ceiling is 544 again. `a`'s next range
  // must not go out on the old row's confirmation: it waits, and fails.
  void ExpectRangeOfARowMadeAnewWaits(Receiver& standby, PostgresRangeStore& a,
                                      PostgresRangeStore& b) {
    ASSERT_TRUE(standby.Signal(SIGSTOP));
    EXPECT_THAT(b.Allocate("orders", 32, 0, NextToken()),
                StatusIs(absl::StatusCode::kUnavailable));
    ASSERT_EQ(StoredCeiling(uri_, "orders"), "544");
    EXPECT_THAT(a.Allocate("orders", 32, 0, NextToken()),
                StatusIs(absl::StatusCode::kUnavailable));
  }

  std::unique_ptr<PostgresInstance> postgres_;
  std::string uri_;
  std::string port_;
};

// A standby that stops confirming (pg_receivewal --synchronous, a real
// physical replication client, stopped with SIGSTOP): a range that needs a
// new reservation is not handed out (UNAVAILABLE) and its numbers are
// skipped; once the standby goes on, ranges are handed out again, above.
// On a cluster of its own: every other test's reservations would wait too.
TEST_F(PostgresStandbyTest, StuckStandbyFailsReservationsUntilItConfirms) {
  const std::string& uri = uri_;
  std::unique_ptr<Receiver> receiver = Stream();
  ASSERT_NE(receiver, nullptr);
  // A role that cannot see the standbys' positions is refused at start,
  // told the grant; with it, it starts.
  ASSERT_THAT(PostgresInstance::Execute(
                  uri,
                  "CREATE ROLE plain LOGIN; CREATE SCHEMA plain AUTHORIZATION "
                  "plain"),
              IsOk());
  const std::string plain_uri =
      absl::StrCat("postgresql://plain@127.0.0.1:", port_,
                   "/postgres?options=-csearch_path%3Dplain");
  PostgresRangeStoreOptions plain;
  plain.uri = plain_uri;
  EXPECT_THAT(PostgresRangeStore::Open(plain),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("GRANT pg_monitor TO plain")));
  ASSERT_THAT(PostgresInstance::Execute(uri, "GRANT pg_monitor TO plain"),
              IsOk());
  EXPECT_THAT(PostgresRangeStore::Open(plain), IsOk());

  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_TRUE(receiver->Signal(SIGSTOP));
  // Inside the confirmed reservation: answered at commit.
  EXPECT_EQ((*store)->Allocate("orders", 256, 0, NextToken()).value(),
            (Range{33, 288}));
  // Past it: the reservation is committed but never confirmed.
  EXPECT_THAT((*store)->Allocate("orders", 512, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT((*store)->Allocate("fresh", 1, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(receiver->Signal(SIGCONT));
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{801, 832}));
  EXPECT_EQ((*store)->Allocate("fresh", 1, 0, NextToken()).value(),
            (Range{2, 2}));
}

// A standby streamed, then went away. It may be one cut off from its
// primary, soon promoted: ranges past what it confirmed wait for it, and
// fail (UNAVAILABLE, their numbers skipped) for standby_left_grace. A
// primary being killed loses its walsenders before its backends, so
// without this a reply waiting for that standby went out the moment it
// left, and the promoted standby handed its numbers out again (seen in
// tests/postgres/failover_test.py). After the grace, ranges are handed out
// on the primary alone (as while the old primary is rebuilt as the new
// standby after a failover), but what they reserve is not taken as
// confirmed, so the ranges after them wait again, and once a standby
// attaches, for it.
TEST_F(PostgresStandbyTest,
       ReservationsMadeWithTheStandbyGoneWaitForItsReturn) {
  std::unique_ptr<Receiver> first = Stream();
  ASSERT_NE(first, nullptr);
  ManualClock clock(absl::FromUnixSeconds(1'800'000'000));
  std::vector<std::string> logged;
  PostgresRangeStoreOptions options = LoggedOptions(&logged);
  options.windows_clock = &clock;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  EXPECT_EQ((*store)->counters().standby_waits, 1);

  // The standby goes away. Inside the reservation it confirmed: answered
  // at commit. Past it: not handed out, since the standby that left did
  // not confirm it; the log says so.
  ASSERT_TRUE(Gone(*first)) << "the standby is still listed";
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  EXPECT_EQ((*store)->counters().standby_waits, 1);
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ((*store)->counters().standby_waits, 2);
  EXPECT_THAT(logged,
              ElementsAre(HasSubstr("1 standby(s) counted before are not "
                                    "listed (127.0.0.1; one that left "
                                    "without confirming may be the one "
                                    "promoted next) within 300ms")));
  // Until the grace is over.
  clock.Advance(options.standby_left_grace - absl::Seconds(1));
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ((*store)->counters().standby_waits, 3);
  // Then on the primary alone: handed out, reserving up to
  // 1768 + 16 * 568.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ((*store)->Allocate("orders", 568, 0, NextToken()).value(),
            (Range{1201, 1768}));
  EXPECT_EQ((*store)->counters().standby_waits, 4);
  // Inside that reservation, but it was never confirmed: each range waits.
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1769, 1800}));
  EXPECT_EQ((*store)->counters().standby_waits, 5);

  // A standby attaches and stops confirming: a range inside that
  // reservation is not handed out until it has the reservation.
  ExpectRangesWaitForAStandbyAttaching(**store, 1801);
}

// A server started, or restarted, while a standby once seen is not listed
// (the old primary still being rebuilt after a failover) has never seen it
// itself; the store's record says it was, so it confirms nothing with none
// listed, and once a standby attaches, its ranges wait for that standby.
TEST_F(PostgresStandbyTest,
       ServerStartedWhileTheSeenStandbyIsGoneConfirmsNothing) {
  std::unique_ptr<Receiver> first = Stream();
  ASSERT_NE(first, nullptr);
  const PostgresRangeStoreOptions options = StoreOptions();
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
        PostgresRangeStore::Open(options);
    ASSERT_THAT(store, IsOk());
    EXPECT_EQ(StandbySeen(uri_), "");
    ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  EXPECT_THAT(StandbySeen(uri_), HasSubstr("counted a standby"));
  ASSERT_TRUE(Gone(*first)) << "the standby is still listed";
  // Two servers started in turn with none listed: inside the reservation
  // made with the standby, every range waits, and none is remembered.
  int64_t low = 33;
  for (int start = 0; start < 2; ++start) {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
        PostgresRangeStore::Open(options);
    ASSERT_THAT(store, IsOk());
    for (int64_t waits = 1; waits <= 2; ++waits, low += 32) {
      EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
                (Range{low, low + 31}));
      EXPECT_EQ((*store)->counters().standby_waits, waits) << start;
    }
  }
  EXPECT_THAT(StandbySeen(uri_), HasSubstr("counted a standby"));

  // A standby attaches and stops confirming: a server started before it
  // hands nothing out until it has what was reserved.
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{low, low + 31}));
  ExpectRangesWaitForAStandbyAttaching(**store, low + 32);
}

// A reservation this server saw confirmed belongs to
// the row it was made for. Another server deletes that row (every range
// came back whole) and this server creates the name again: the new row is
// on the primary alone until the standby confirms it, so its first range
// must wait for the standby; answered at commit (inside the old row's
// confirmed ceiling), a standby promoted with the delete but not the new
// row starts the name at 1 again and hands [1, 32] out twice.
TEST_F(PostgresStandbyTest,
       ARowDeletedByAnotherServerLeavesNoConfirmedCeiling) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> a =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(a, IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> b =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(b, IsOk());
  const uint64_t first = NextToken(), second = NextToken();
  ASSERT_EQ((*a)->Allocate("orders", 32, 0, first).value(), (Range{1, 32}));
  ASSERT_EQ((*a)->Allocate("orders", 32, 0, second).value(), (Range{33, 64}));
  ASSERT_TRUE((*a)->Return("orders", 64, 32, second)->applied);
  ASSERT_TRUE((*a)->Return("orders", 32, 0, first)->applied);
  ASSERT_THAT((*b)->Delete("orders"), IsOk());
  ASSERT_TRUE(standby->Signal(SIGSTOP));
  EXPECT_THAT((*a)->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  // Whatever it answered, the new row must hold a ceiling past it.
  EXPECT_EQ(QueryOne(uri_,
                     "SELECT ceiling >= max FROM hilo_collections WHERE name "
                     "= 'orders'::bytea"),
            "t");
  ASSERT_TRUE(standby->Signal(SIGCONT));
}

// The same with a retirement: the new row starts after the retired Max
// (33), and a standby promoted with the retirement but not the new row
// starts it there again.
TEST_F(PostgresStandbyTest,
       ARowRetiredByAnotherServerLeavesNoConfirmedCeiling) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> a =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(a, IsOk());
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> b =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ((*a)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_THAT((*b)->Retire("orders"), IsOk());
  ASSERT_TRUE(standby->Signal(SIGSTOP));
  EXPECT_THAT((*a)->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(standby->Signal(SIGCONT));
}

// The row made anew by another server, whose ceiling is exactly the one
// this server saw confirmed for the old row (equal range sizes reserve
// equally far), and whose first wait failed: the new reservation is on the
// primary alone. Answered at commit on the old row's confirmation, this
// server's range [33, 64] would be lost with a failover to the standby,
// which starts the name at 1 again. The row's incarnation tells the two
// rows apart, so the range waits, and fails while the standby does not
// confirm.
TEST_F(PostgresStandbyTest,
       ARowMadeAnewWithTheSameCeilingByAnotherServerWaits) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  std::unique_ptr<PostgresRangeStore> a = Server(), b = Server();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  const uint64_t first = NextToken();
  ASSERT_EQ(a->Allocate("orders", 32, 0, first).value(), (Range{1, 32}));
  ASSERT_EQ(StoredCeiling(uri_, "orders"), "544");
  ASSERT_TRUE(a->Return("orders", 32, 0, first)->applied);
  ASSERT_THAT(b->Delete("orders"), IsOk());
  ExpectRangeOfARowMadeAnewWaits(*standby, *a, *b);
  EXPECT_EQ(a->counters().standby_waits, 2);
  // Once the standby has the new row, its ranges go out again, above
  // those skipped, and the next is answered at commit.
  ASSERT_TRUE(standby->Signal(SIGCONT));
  EXPECT_EQ(a->Allocate("orders", 32, 0, NextToken()).value(), (Range{65, 96}));
  EXPECT_EQ(a->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{97, 128}));
  EXPECT_EQ(a->counters().standby_waits, 3);
}

// After a retirement the ceiling is not a coincidence: the new row starts
// after the retired Max with the retired ceiling, the one this server saw
// confirmed. Made by another server whose wait failed, it is the same
// residual path.
TEST_F(PostgresStandbyTest, ARowMadeAnewAfterARetirementByAnotherServerWaits) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  std::unique_ptr<PostgresRangeStore> a = Server(), b = Server();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_EQ(a->Allocate("orders", 32, 0, NextToken()).value(), (Range{1, 32}));
  ASSERT_THAT(b->Retire("orders"), IsOk());
  ExpectRangeOfARowMadeAnewWaits(*standby, *a, *b);
  ASSERT_TRUE(standby->Signal(SIGCONT));
}

// Standbys are told apart by the machine they connect from, not only
// counted: another replication client elsewhere (a WAL archiver, say; here
// one on the server's socket) that attaches while the standby counted is
// away does not confirm in its place, so a standby promoted without the
// reservation cannot hand its numbers out again; the standby back, from
// its address, does confirm.
TEST_F(PostgresStandbyTest, AnotherClientDoesNotConfirmForTheStandbyAway) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  std::vector<std::string> logged;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(LoggedOptions(&logged));
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_TRUE(Gone(*standby)) << "the standby is still listed";
  const std::string socket = QueryOne(uri_, "SHOW unix_socket_directories");
  ASSERT_FALSE(socket.empty());
  std::unique_ptr<Receiver> archiver = Stream(socket);
  ASSERT_NE(archiver, nullptr);
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(logged, ElementsAre(HasSubstr(
                          "1 standby(s) counted before are not listed "
                          "(127.0.0.1;")));
  std::unique_ptr<Receiver> back = Stream("127.0.0.1", 2);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{601, 632}));
}

// A wait fails while the standby it counted is still listed (paused, or
// its primary dying); the standby then leaves without confirming. The next
// wait still counts it: a reply let out with none listed would be a
// reservation the standby never had.
TEST_F(PostgresStandbyTest, AStandbyThatLeavesAfterAFailedWaitConfirmsNothing) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_TRUE(standby->Signal(SIGSTOP));
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_TRUE(Gone(*standby)) << "the standby is still listed";
  EXPECT_THAT((*store)->Allocate("orders", 32, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
}

// The same on a connection that has not waited yet (a server started, or
// reconnected, while the standby streams): the standby leaves before the
// first wait, which still counts it, since the connection counted the
// standbys when it opened.
TEST_F(PostgresStandbyTest,
       AStandbyThatLeavesBeforeTheFirstWaitConfirmsNothing) {
  std::unique_ptr<Receiver> standby = Stream();
  ASSERT_NE(standby, nullptr);
  {
    absl::StatusOr<std::unique_ptr<PostgresRangeStore>> earlier =
        PostgresRangeStore::Open(StoreOptions());
    ASSERT_THAT(earlier, IsOk());
    ASSERT_EQ((*earlier)->Allocate("orders", 32, 0, NextToken()).value(),
              (Range{1, 32}));
  }
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(StoreOptions());
  ASSERT_THAT(store, IsOk());
  ASSERT_TRUE(Gone(*standby)) << "the standby is still listed";
  // Past the ceiling (544) the standby confirmed.
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
}

// The grace a standby that left is given runs from the wait that found it
// missing, and is its own: standby A leaves (a wait fails), comes back, and
// no wait runs for longer than the grace (ranges inside confirmed
// reservations need none); then standby B leaves. The next wait must still
// count B, which left just now and may be the one promoted next, not take
// it as gone for good on A's old clock.
TEST_F(PostgresStandbyTest, AnotherStandbyLeavingGetsAGraceOfItsOwn) {
  std::unique_ptr<Receiver> a = Stream();
  ASSERT_NE(a, nullptr);
  const std::string socket = QueryOne(uri_, "SHOW unix_socket_directories");
  ASSERT_FALSE(socket.empty());
  std::unique_ptr<Receiver> b = Stream(socket, 2);
  ASSERT_NE(b, nullptr);
  ManualClock clock(absl::FromUnixSeconds(1'800'000'000));
  PostgresRangeStoreOptions options = StoreOptions();
  options.windows_clock = &clock;
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
      PostgresRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  ASSERT_EQ((*store)->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  const std::string listed = "SELECT count(*) FROM pg_stat_replication";
  a->Kill();
  ASSERT_TRUE(WaitForAnswer(uri_, listed, "1")) << "a is still listed";
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  a = Stream("127.0.0.1", 2);
  ASSERT_NE(a, nullptr);
  clock.Advance(options.standby_left_grace + absl::Seconds(1));
  b->Kill();
  ASSERT_TRUE(WaitForAnswer(uri_, listed, "1")) << "b is still listed";
  EXPECT_THAT((*store)->Allocate("orders", 568, 0, NextToken()),
              StatusIs(absl::StatusCode::kUnavailable));
  // B's own grace over: handed out on those listed.
  clock.Advance(options.standby_left_grace);
  EXPECT_EQ((*store)->Allocate("orders", 568, 0, NextToken()).value(),
            (Range{1169, 1736}));
}

}  // namespace
}  // namespace hilo
