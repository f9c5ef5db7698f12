// CollectionLimit: the most collections a node stores, counted by the
// services over any RangeStore.
//
// A store creates a collection's row on its first NextRange or SetFloor; an
// unauthenticated client could otherwise fill the disk with new names. The
// services ask the limit before each call that may create a row:
//
//   if (limit.TryReserve()) {
//     store->AllocateAsync(..., [&](absl::StatusOr<Allocation> a) {
//       limit.Release(a.ok() && a->created);
//       ...
//     });
//   } else {
//     // Full, or could be once the calls in flight finish: the call goes
//     // ahead only for a collection that already has a row (see
//     // RefuseNewCollection).
//   }
//
// A reservation counts as a created row until released, so the count never
// passes the limit however many calls race; near the limit, calls on
// existing collections pay for one read more. A row is deleted only by
// DeleteCollection, which tells the limit (Deleted).
//
// Thread-safe.
#ifndef HILO_SERVICE_COLLECTION_LIMIT_H_
#define HILO_SERVICE_COLLECTION_LIMIT_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hilo/base/mutex.h"
#include "service/range_store.h"

namespace hilo {

inline constexpr int64_t kDefaultMaxCollections = 100'000;

class CollectionLimit {
 public:
  // `max` collections (0: no limit), of which `existing` are stored now.
  CollectionLimit(int64_t max, int64_t existing);

  // True if one more row fits even if every reserved call creates one; the
  // caller then calls Release exactly once. False: only a call on an
  // existing collection may go ahead (nothing to release).
  bool TryReserve();
  // Ends a reservation; `created` if the call stored a new row.
  void Release(bool created);
  // A row was deleted: its place is free again.
  void Deleted();

  int64_t max() const { return max_; }
  int64_t count() const;

  // RESOURCE_EXHAUSTED naming `collection` and the limit.
  absl::Status RefuseNewCollection(absl::string_view collection) const;

 private:
  const int64_t max_;
  mutable base::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

// The number of collections `store` holds, read a page at a time.
absl::StatusOr<int64_t> CountCollections(RangeStore* store);

}  // namespace hilo

#endif  // HILO_SERVICE_COLLECTION_LIMIT_H_
