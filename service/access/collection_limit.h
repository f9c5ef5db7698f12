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
//   // call goes ahead only for a collection that already has a row
//   // (AllocateExistingAsync; NoRowRefusal becomes RefuseNewCollection).
//   store->AllocateAsync(..., [&](absl::StatusOr<Allocation> a) {
//     limit.Settle(reserved, a.ok() && a->created);
//     ...
//   });
//
// A reservation counts as a created row until settled, so neither the
// count nor the creations of the last minute ever pass their limits however
// many calls race; near either limit, calls on existing collections pay
// nothing more (the store looks for their row in the allocation's own
// transaction), and a new collection may be refused while calls in flight
// (most of them on existing collections) hold the window's last places; the
// refusal then says to retry in a second. The minute is a sliding window on a
// monotonic clock (MonotonicClock, or a test's): a creation at time t counts
// against every reservation before t + 1 min, whatever the wall clock does. A
// row is deleted only by DeleteCollection (or retired by it), which tells the
// limit (Deleted). A store shared by many servers (PostgreSQL) holds the count
// itself, for all of them (StoreFullRefusal); its servers build the limit
// with `max` 0, for the rates alone. A
// NextRange without a reservation never creates a row (the store refuses it
// in the transaction that would). A SetFloor without one (the admin path,
// which reads the row first) still creates a row if a DeleteCollection
// removed the one it found before its write; that row is counted too
// (Settle), so the count and the window stay true, and each such race may
// take them one past their limits.
//
// Thread-safe.
#ifndef HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_
#define HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
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

// Who a creation is charged to, under an authorization policy: each
// identity has a window of its own (docs/security.md, "Creation budgets").
struct CreationQuota {
  // The identity whose grant allowed the collection; empty: no budget of
  // its own (no policy).
  std::string identity;
  // Its most creations in any minute; 0: none of its own.
  int64_t per_minute = 0;
};
// The budget of an identity whose grants do not set
// collection_creations_per_minute: one a second. A tenth of the node's
// default, so nine identities flooding at once still leave a tenth of the
// node's budget to the others, and one identity alone needs 28 hours (not
// under 3) to fill the default --max_collections (measured:
// abuse.tenant_creation_flood, docs/security.md).
inline constexpr int64_t kDefaultCreationsPerIdentityPerMinute = 60;

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
  // With a `quota`, the row must also fit in the last minute's creations
  // charged to quota->identity (and counts there once created).
  bool TryReserve(const CreationQuota* quota = nullptr);
  // Ends a call that went ahead: `reserved` if TryReserve was true for it
  // (the reservation ends), `created` if it stored a new row, which counts
  // whether or not it was reserved; `quota` as given to TryReserve.
  void Settle(bool reserved, bool created,
              const CreationQuota* quota = nullptr);
  // A row was deleted: its place is free again.
  void Deleted();

  int64_t max() const { return max_; }
  int64_t max_creations_per_minute() const { return max_per_minute_; }
  int64_t count() const;

  // RESOURCE_EXHAUSTED naming `collection` and the limit that is full: the
  // count (--max_collections), or the creations of the last minute
  // (--max_collection_creations_per_minute, with when to retry). The status
  // carries which (CollectionRefusalReason). With a `quota` whose identity's
  // window is full (and the count is not): that identity's budget
  // (kRefusedForIdentityRate), naming it, its limit and when to retry.
  absl::Status RefuseNewCollection(absl::string_view collection,
                                   const CreationQuota* quota = nullptr) const;

  // Identities with a window kept (for tests).
  int64_t identities_tracked() const;

 private:
  // One identity's creations of the last minute, and its reservations.
  struct IdentityWindow {
    std::deque<absl::Time> created_at;
    int64_t reserved = 0;
  };

  // Drops the creations that left the window at `now`.
  void Expire(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `quota`'s window with what left it at `now` dropped, or null if it has
  // none (then nothing is added).
  IdentityWindow* Window(const CreationQuota* quota, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets `quota`'s window once it holds nothing.
  void Forget(const CreationQuota& quota) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_;
  const int64_t max_per_minute_;
  const Clock* const clock_;
  mutable base::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  // When each creation of the last minute happened, oldest first; at most
  // max_per_minute_ of them.
  mutable std::deque<absl::Time> created_at_ ABSL_GUARDED_BY(mu_);
  // By identity; an entry is dropped when a call of its identity finds it
  // empty. Its keys are identities a policy grant names (Authorizer), so
  // they are as many as the policies in force named.
  mutable absl::flat_hash_map<std::string, IdentityWindow> identities_
      ABSL_GUARDED_BY(mu_);
};

// Why a status refused a new collection: kRefusedForCount,
// kRefusedForRate or kRefusedForIdentityRate for a status of
// RefuseNewCollection (kRefusedForCount also for a store's
// StoreFullRefusal), empty for any other (a full disk is RESOURCE_EXHAUSTED
// too). Metrics count refusals by it.
inline constexpr char kRefusedForCount[] = "max_collections";
inline constexpr char kRefusedForRate[] = "rate";
inline constexpr char kRefusedForIdentityRate[] = "identity_rate";
absl::string_view CollectionRefusalReason(const absl::Status& status);

// The number of collections `store` holds, read a page at a time.
absl::StatusOr<int64_t> CountCollections(RangeStore* store);

}  // namespace hilo

#endif  // HILO_SERVICE_ACCESS_COLLECTION_LIMIT_H_
