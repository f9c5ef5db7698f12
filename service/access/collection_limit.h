// CollectionLimit: the most collections a node stores, and the most it
// creates a minute, counted by the services over any RangeStore.
//
// A store creates a collection's row on its first NextRange or SetFloor; an
// unauthenticated client could otherwise fill the disk with new names, or
// (below the count) churn through rows fast enough to grow the database and
// its write load. The
// services ask the limit before each call that may create a row:
//
//   const bool reserved = limit.TryReserve();
//   // Not reserved: full, or could be once the calls in flight finish; the
//   // call goes ahead only for a collection that already has a row (else
//   // RefuseNewCollection).
//   store->AllocateAsync(..., [&](absl::StatusOr<Allocation> a) {
//     limit.Settle(reserved, a.ok() && a->created);
//     ...
//   });
//
// A reservation counts as a created row until settled, so neither the
// count nor the creations of the last minute ever pass their limits however
// many calls race; near either limit, calls on existing collections pay for
// one read more, and a new collection may be refused while calls in flight
// (most of them on existing collections) hold the window's last places; the
// refusal then says to retry in a second. The minute is a sliding window on a
// monotonic clock (MonotonicClock, or a test's): a creation at time t counts
// against every reservation before t + 1 min, whatever the wall clock does. A
// row is deleted only by DeleteCollection, which tells the limit (Deleted). A
// call that went ahead without a reservation still creates a row if a
// DeleteCollection removed the one it found before its write; that row is
// counted too (Settle), so the count and the window stay true, and each such
// race may take them one past their limits.
//
// Thread-safe.
#ifndef HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_
#define HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/store/range_store.h"

namespace hilo {

inline constexpr int64_t kDefaultMaxCollections = 100'000;
// Ten a second on average: far above what an application creating its
// collections by hand needs, far below what fills a disk.
inline constexpr int64_t kDefaultMaxCollectionCreationsPerMinute = 600;

class CollectionLimit {
 public:
  // `max` collections (0: no limit), of which `existing` are stored now, and
  // at most `max_creations_per_minute` (0: no limit) created in any minute
  // by `clock`, which must never go back (null: MonotonicClock) and must
  // outlive the limit.
  CollectionLimit(int64_t max, int64_t existing,
                  int64_t max_creations_per_minute = 0,
                  const Clock* clock = nullptr);

  // True if one more row fits, in the count and in the last minute's
  // creations, even if every reserved call creates one. False: only a call
  // on an existing collection may go ahead. Either way a call that goes
  // ahead calls Settle exactly once.
  bool TryReserve();
  // Ends a call that went ahead: `reserved` if TryReserve was true for it
  // (the reservation ends), `created` if it stored a new row, which counts
  // whether or not it was reserved.
  void Settle(bool reserved, bool created);
  // A row was deleted: its place is free again.
  void Deleted();

  int64_t max() const { return max_; }
  int64_t max_creations_per_minute() const { return max_per_minute_; }
  int64_t count() const;

  // RESOURCE_EXHAUSTED naming `collection` and the limit that is full: the
  // count (--max_collections), or the creations of the last minute
  // (--max_collection_creations_per_minute, with when to retry). The status
  // carries which (CollectionRefusalReason).
  absl::Status RefuseNewCollection(absl::string_view collection) const;

 private:
  // Drops the creations that left the window at `now`.
  void Expire(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_;
  const int64_t max_per_minute_;
  const Clock* const clock_;
  mutable base::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  // When each creation of the last minute happened, oldest first; at most
  // max_per_minute_ of them.
  mutable std::deque<absl::Time> created_at_ ABSL_GUARDED_BY(mu_);
};

// Why a status refused a new collection: kRefusedForCount or
// kRefusedForRate for a status of RefuseNewCollection, empty for any other
// (a full disk is RESOURCE_EXHAUSTED too). Metrics count refusals by it.
inline constexpr char kRefusedForCount[] = "max_collections";
inline constexpr char kRefusedForRate[] = "rate";
absl::string_view CollectionRefusalReason(const absl::Status& status);

// The number of collections `store` holds, read a page at a time.
absl::StatusOr<int64_t> CountCollections(RangeStore* store);

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_
