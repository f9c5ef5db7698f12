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
//  - PostgreSQL, when $HILO_FUZZ_POSTGRES_URI names a database: two
//    PostgresRangeStores on it, as two pods of one node (one tag, one
//    shared row per collection: the README's rules make them one store to
//    a client), their collection names made unique to the process and the
//    input (so inputs never meet). Calls one at a time go to either pod in
//    turn (pod(i)); with $HILO_FUZZ_POSTGRES_CONCURRENT=1 (concurrent())
//    the calls of one batch go to both at once, so that they collide on
//    rows and the stores' set-asides and retries run. Both restarts close
//    the stores and open new ones on the same database: a node's crash
//    keeps every committed row there, which is what the new stores must
//    read. At exit, the process prints to stderr how often the stores set
//    operations aside and ran batches again (RetryReport).
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
  // The pod that takes call number `i`: the two pods in turn on
  // PostgreSQL, the one store on SQLite.
  RangeStore& pod(size_t i) {
    return i % 2 == 1 && second_ != nullptr ? *second_ : *store_;
  }
  // Whether the calls of a batch go to both pods at once (see above).
  bool concurrent() const { return concurrent_; }
  // How often, so far in this process, the PostgreSQL stores set operations
  // aside and ran batches again; empty on SQLite.
  static std::string RetryReport();
  // The name the store keeps `collection` under.
  std::string Stored(absl::string_view collection) const;
  void Restart();
  void CrashRestart();

 private:
  void Open();
  // Closes the stores, adding the PostgreSQL ones' counters to the report.
  void Close();
  void RemoveFiles(const std::string& path) const;

  std::string path_;    // SQLite: the database file
  std::string prefix_;  // PostgreSQL: of every collection name
  std::unique_ptr<RangeStore> store_;
  std::unique_ptr<RangeStore> second_;  // PostgreSQL: the other pod
  bool concurrent_ = false;
};

}  // namespace hilo::fuzz

#endif  // HILO_FUZZ_STORE_UNDER_TEST_H_
