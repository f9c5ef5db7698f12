// What whoever can read a store's database can do with it (README "The
// contract", Security): read each collection's Max and floor, but not hand a
// live range out again. A store keeps only a digest of each range token, so
// the value read from the database, sent as a token, is refused; the
// holder's token still works; tokens an older server stored in clear become
// digests at the first start; and the SQLite files and directories a server
// creates are its owner's alone, whatever the umask.
//
// The SQLite half runs with the unit tests; the PostgreSQL half on the
// run's database (label e2e.postgresql).
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/await.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/range_token.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/postgres_instance.h"
#include "testing/range_store_fixture.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::NextToken;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::TempDir;

SqliteRangeStoreOptions OptionsFor(const std::string& path) {
  SqliteRangeStoreOptions options;
  options.path = path;
  return options;
}

// The two token columns of `collection`'s row, as a reader of the SQLite
// file sees them with the sqlite3 library alone.
std::vector<uint64_t> ReadSqliteTokens(const std::string& path,
                                       const std::string& collection) {
  std::vector<uint64_t> tokens;
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) ==
          SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT range_token, previous_token FROM collections "
                         "WHERE name = ?1",
                         -1, &stmt, nullptr) == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, collection.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      tokens.push_back(static_cast<uint64_t>(sqlite3_column_int64(stmt, 0)));
      tokens.push_back(static_cast<uint64_t>(sqlite3_column_int64(stmt, 1)));
    }
  }
  if (tokens.empty())
    ADD_FAILURE() << "cannot read " << path << ": " << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return tokens;
}

// The same through a PostgreSQL session that only reads.
std::vector<uint64_t> ReadPostgresTokens(const std::string& uri,
                                         const std::string& collection) {
  std::vector<uint64_t> tokens;
  PGconn* conn = PQconnectdb(uri.c_str());
  const std::string sql = absl::StrCat(
      "SELECT range_token, previous_token FROM hilo_collections WHERE name = "
      "convert_to('",
      collection, "', 'UTF8')");
  PGresult* r = PQexec(conn, sql.c_str());
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    for (int column : {0, 1}) {
      tokens.push_back(
          static_cast<uint64_t>(std::stoll(PQgetvalue(r, 0, column))));
    }
  } else {
    ADD_FAILURE() << sql << ": " << PQerrorMessage(conn);
  }
  PQclear(r);
  PQfinish(conn);
  return tokens;
}

enum class Backend { kSqlite, kPostgres };

class StoredTokenTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
      ASSERT_THAT(postgres, IsOk());
      absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
      ASSERT_THAT(uri, IsOk());
      uri_ = *uri;
    }
  }

  void Open() {
    store_.reset();
    if (GetParam() == Backend::kSqlite) {
      absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
          SqliteRangeStore::Open(OptionsFor(dir_.File("hilo.db")));
      ASSERT_THAT(store, IsOk());
      store_ = *std::move(store);
    } else {
      PostgresRangeStoreOptions options;
      options.uri = uri_;
      absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
          PostgresRangeStore::Open(std::move(options));
      ASSERT_THAT(store, IsOk());
      store_ = *std::move(store);
    }
  }

  // What a reader of the database sees of the row: range_token and
  // previous_token.
  std::vector<uint64_t> StoredTokens(const std::string& collection) {
    return GetParam() == Backend::kSqlite
               ? ReadSqliteTokens(dir_.File("hilo.db"), collection)
               : ReadPostgresTokens(uri_, collection);
  }

  // Makes the store's tables hold `token` in clear for a range 33-64 of
  // "orders" (after a range 1-32 with `previous`), as a server before
  // digests left them, and marks the schema as of that server.
  void WriteClearTokensOfAnOlderServer(uint64_t token, uint64_t previous) {
    const std::string set = absl::StrFormat(
        "max = 64, return_floor = 32, range_token = %d, previous_token = %d, "
        "previous_return_floor = 0",
        static_cast<int64_t>(token), static_cast<int64_t>(previous));
    if (GetParam() == Backend::kSqlite) {
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open(dir_.File("hilo.db").c_str(), &db), SQLITE_OK);
      const std::string sql =
          absl::StrCat("UPDATE collections SET ", set,
                       " WHERE name = 'orders'; ALTER TABLE collections DROP "
                       "COLUMN ceiling; PRAGMA user_version = 3;");
      EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
                SQLITE_OK)
          << sqlite3_errmsg(db);
      sqlite3_close(db);
    } else {
      ASSERT_THAT(PostgresInstance::Execute(
                      uri_, absl::StrCat("UPDATE hilo_collections SET ", set,
                                         "; UPDATE hilo_meta SET value = '2' "
                                         "WHERE key = 'schema_version'")),
                  IsOk());
    }
  }

  TempDir dir_;
  std::string uri_;
  std::unique_ptr<RangeStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoredTokenTest,
                         ::testing::Values(Backend::kSqlite,
                                           Backend::kPostgres),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kSqlite ? "Sqlite"
                                                                 : "Postgres";
                         });

// A local user copies the file (or a role with SELECT reads the table) and
// sends what it finds as the token: the range stays out, Max stays.
TEST_P(StoredTokenTest, ValueReadFromTheDatabaseIsRefusedAsAToken) {
  Open();
  const uint64_t first = NextToken();
  const uint64_t second = NextToken();
  ASSERT_EQ(store_->Allocate("orders", 32, 0, first).value(), (Range{1, 32}));
  ASSERT_EQ(store_->Allocate("orders", 32, 0, second).value(), (Range{33, 64}));
  const std::vector<uint64_t> stored = StoredTokens("orders");
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_NE(stored[0], second);
  EXPECT_NE(stored[1], first);
  for (uint64_t read : stored) {
    absl::StatusOr<ReturnOutcome> whole =
        store_->Return("orders", 64, 32, read);
    ASSERT_THAT(whole, IsOk());
    EXPECT_FALSE(whole->applied) << read;
    EXPECT_EQ(whole->max, 64);
    absl::StatusOr<ReturnOutcome> all = store_->Return("orders", 64, 0, read);
    ASSERT_THAT(all, IsOk());
    EXPECT_FALSE(all->applied) << read;
  }
  using Outcomes = std::vector<absl::StatusOr<ReturnOutcome>>;
  std::vector<ReturnItem> items = {
      {.collection = "orders", .end = 64, .last = 32, .token = stored[0]}};
  absl::StatusOr<Outcomes> many =
      base::Await<absl::StatusOr<Outcomes>>([&](StoreCallback<Outcomes> done) {
        store_->ReturnManyAsync(items, std::move(done));
      });
  ASSERT_THAT(many, IsOk());
  ASSERT_EQ(many->size(), 1u);
  ASSERT_THAT((*many)[0], IsOk());
  EXPECT_FALSE((*many)[0]->applied);
  // Nothing came back: the next range starts above 64.
  EXPECT_EQ(store_->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{65, 96}));
}

TEST_P(StoredTokenTest, HoldersTokenStillReturnsItsRange) {
  Open();
  const uint64_t first = NextToken();
  const uint64_t second = NextToken();
  ASSERT_EQ(store_->Allocate("orders", 32, 0, first).value(), (Range{1, 32}));
  ASSERT_EQ(store_->Allocate("orders", 32, 0, second).value(), (Range{33, 64}));
  absl::StatusOr<ReturnOutcome> later =
      store_->Return("orders", 64, 32, second);
  ASSERT_THAT(later, IsOk());
  EXPECT_TRUE(later->applied);
  // The earlier range is the last issued again, its token with it.
  absl::StatusOr<ReturnOutcome> tail = store_->Return("orders", 32, 10, first);
  ASSERT_THAT(tail, IsOk());
  EXPECT_TRUE(tail->applied);
  EXPECT_EQ(store_->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{11, 42}));
}

// A database from before digests keeps its tokens in clear, and whoever read
// it (a copy, a backup, a dump) before the upgrade may hold them: the upgrade
// retires every range out rather than carrying its token over, so neither the
// old token nor anything else makes a return apply, and the numbers of those
// ranges are never issued again.
TEST_P(StoredTokenTest, ClearTokensOfAnOlderServerAreRetiredOnUpgrade) {
  Open();
  ASSERT_EQ(store_->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{1, 32}));
  ASSERT_EQ(store_->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{33, 64}));
  store_.reset();
  const uint64_t first = NextToken();
  const uint64_t second = NextToken();
  WriteClearTokensOfAnOlderServer(second, first);
  ASSERT_EQ(StoredTokens("orders"), (std::vector<uint64_t>{second, first}));
  Open();
  EXPECT_EQ(StoredTokens("orders"), (std::vector<uint64_t>{0, 0}));
  for (uint64_t token :
       {second, first, RangeTokenDigest(second), RangeTokenDigest(first)}) {
    absl::StatusOr<ReturnOutcome> later =
        store_->Return("orders", 64, 32, token);
    ASSERT_THAT(later, IsOk());
    EXPECT_FALSE(later->applied) << token;
    EXPECT_EQ(later->max, 64);
  }
  EXPECT_EQ(store_->Allocate("orders", 32, 0, NextToken()).value(),
            (Range{65, 96}));
}

TEST(RangeTokenDigestTest, IsSha256OfTheBigEndianTokenWithItsLowBitSet) {
  // SHA-256 of the eight bytes 00 .. 00 01 begins cd2662154e6d76b2.
  EXPECT_EQ(RangeTokenDigest(1), 0xcd2662154e6d76b3u);
  EXPECT_EQ(RangeTokenDigest(0), 0u);
  EXPECT_NE(RangeTokenDigest(2), RangeTokenDigest(1));
}

// Mode bits of `path` (permissions only), or -1 failing the test.
int Mode(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "cannot stat " << path;
    return -1;
  }
  return static_cast<int>(st.st_mode & 07777);
}

// Restores the process's umask when it goes.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(umask(mask)) {}
  ~ScopedUmask() { umask(old_); }

 private:
  const mode_t old_;
};

TEST(SqliteFileModeTest,
     FilesAndDirectoriesItCreatesAreOwnerOnlyUnderUmask022) {
  TempDir dir;
  ScopedUmask mask(022);
  const std::string path = dir.File("data/hilo/hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(OptionsFor(path));
  ASSERT_THAT(store, IsOk());
  // A write brings the WAL and its index into being.
  ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  EXPECT_EQ(Mode(dir.File("data")), 0700);
  EXPECT_EQ(Mode(dir.File("data/hilo")), 0700);
  EXPECT_EQ(Mode(path), 0600);
  EXPECT_EQ(Mode(path + "-wal"), 0600);
  EXPECT_EQ(Mode(path + "-shm"), 0600);
}

TEST(SqliteFileModeTest, NewFileInAnExistingDirectoryIsOwnerOnlyUnderUmask0) {
  TempDir dir;
  ScopedUmask mask(0);
  const std::string path = dir.File("hilo.db");
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(OptionsFor(path));
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->Allocate("orders", 32, 0, NextToken()), IsOk());
  EXPECT_EQ(Mode(path), 0600);
  EXPECT_EQ(Mode(path + "-wal"), 0600);
  EXPECT_EQ(Mode(path + "-shm"), 0600);
}

}  // namespace
}  // namespace hilo
