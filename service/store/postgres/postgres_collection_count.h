// PostgresCollectionCount: how many collections the PostgreSQL store's
// database holds, as this server knows it. Commits that create or delete
// rows move it; a probe's count(*) (on the read connection) replaces it,
// unless a commit that changes the count ran while that count was taken.
//
//   const int64_t at = count.Sequence();  // before the count(*) is sent
//   ...                                   // count(*) answers `counted`
//   count.StoreIfCurrent(counted, at);
//
// A write that creates or deletes rows brackets its commit with
// ChangeBegins() and ChangeEnds(), then Add()s what it changed.
//
// Thread-safe. Private to service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_COLLECTION_COUNT_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_COLLECTION_COUNT_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "hilo/base/mutex.h"

namespace hilo {
namespace internal {

class PostgresCollectionCount {
 public:
  int64_t Load() const { return count_.load(std::memory_order_relaxed); }
  // At Open, before any batch runs.
  void Set(int64_t count) { count_.store(count, std::memory_order_relaxed); }
  void Add(int64_t created) {
    count_.fetch_add(created, std::memory_order_relaxed);
  }

  // Orders a probe's count against the writes' changes: odd while a commit
  // that creates or deletes rows is in flight, bumped as it begins and as
  // it ends. A count whose snapshot a commit may have missed (its change
  // added already) must not overwrite the sum.
  int64_t Sequence() {
    base::MutexLock lock(&mu_);
    return sequence_;
  }
  void ChangeBegins() { Bump(); }
  void ChangeEnds() { Bump(); }
  // Stores a probe's count of the rows, begun when the sequence was
  // `sequence`, unless a commit that changes the count has run since.
  void StoreIfCurrent(int64_t counted, int64_t sequence) {
    base::MutexLock lock(&mu_);
    // Odd: a commit was in flight when the count began; changed: one began
    // since. Either may have changed the rows after the count's snapshot
    // and added its change already; the next probe counts again.
    if (sequence % 2 != 0 || sequence_ != sequence) return;
    count_.store(counted, std::memory_order_relaxed);
  }

 private:
  void Bump() {
    base::MutexLock lock(&mu_);
    ++sequence_;
  }

  std::atomic<int64_t> count_{0};
  base::Mutex mu_;
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_COLLECTION_COUNT_H_
