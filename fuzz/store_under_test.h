// StoreUnderTest: the RangeStore one fuzz input drives, and the two ways it
// restarts. Only RangeStore and the engines' public Open are used, so the
// fuzzer follows the stores wherever their insides go.
//
//  - SQLite (the default): a SqliteRangeStore over a scratch file, removed
//    when the input ends. Restart closes it and opens the file again.
//    CrashRestart opens instead a copy of the database and its WAL taken
//    while the store is open, without the -shm index: the files a process
//    killed at that moment leaves (nothing acknowledged may be lost; the
//    WAL is replayed and its index rebuilt). The copy is taken between two
//    operations, once every acknowledged commit has been written; the open
//    store is then destroyed on files nobody reads again.
//  - PostgreSQL, when $HILO_FUZZ_POSTGRES_URI names a database: a
//    PostgresRangeStore on it, its collection names made unique to the
//    process and the input (so inputs never meet). Both restarts close the
//    store and open a new one on the same database: a node's crash keeps
//    every committed row there, which is what the new store must read.
//
// Not thread-safe.
#ifndef HILO_FUZZ_STORE_UNDER_TEST_H_
#define HILO_FUZZ_STORE_UNDER_TEST_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "service/store/range_store.h"

namespace hilo::fuzz {

class StoreUnderTest {
 public:
  // Opens the store for one input; Fail()s if it cannot.
  StoreUnderTest();
  ~StoreUnderTest();
  StoreUnderTest(const StoreUnderTest&) = delete;
  StoreUnderTest& operator=(const StoreUnderTest&) = delete;

  RangeStore& store() { return *store_; }
  // The name the store keeps `collection` under.
  std::string Stored(absl::string_view collection) const;
  void Restart();
  void CrashRestart();

 private:
  void Open();
  void RemoveFiles(const std::string& path) const;

  std::string path_;    // SQLite: the database file
  std::string prefix_;  // PostgreSQL: of every collection name
  std::unique_ptr<RangeStore> store_;
};

}  // namespace hilo::fuzz

#endif  // HILO_FUZZ_STORE_UNDER_TEST_H_
