// PostgresRangeStore: a RangeStore in a PostgreSQL database shared by any
// number of hilo servers.
//
// Each collection is one row of table `hilo_collections`; every server on
// the database draws from the same row, so numbers are unique across the
// fleet whatever the node tags. A server keeps nothing of its own: any of
// them can be lost, replaced or added.
//
// Group commit, as for SQLite: operations that queue while a transaction is
// in flight go into the next one. A batch costs two round trips whatever
// its size (libpq's pipeline mode): the first begins the transaction and
// locks and reads every row the batch writes (SELECT ... FOR UPDATE SKIP
// LOCKED); the rows then change in memory by the rules of
// collection_rules.h, one operation after another, so an operation the
// rules refuse changes nothing and fails alone; the second writes the
// changed rows and commits.
//
// No batch waits for a row lock. A row another session holds (another
// server's batch for a moment; a server frozen inside its transaction, or a
// psql session, for longer) is skipped: the operations on it run again in a
// later batch after a short wait, and fail with UNAVAILABLE once they have
// waited lock_timeout, while every other operation goes on. Sessions end
// after idle_in_transaction_timeout inside a transaction, so a frozen server
// holds its rows for seconds only. Creating a row is no exception: a server
// inserts a collection's row only while it holds that name's creation lock
// (a transaction-scoped advisory lock, taken without waiting; key in
// postgres_row_codec.h), so a batch that would create a collection another
// session is creating (its row inserted, not yet committed, hence
// invisible) finds that lock taken and sets the operations on it aside the
// same way, instead of waiting on the primary key. A batch creates at most
// 64 rows (each lock takes a slot of the database's shared lock table);
// further creations run in the next batches, at once. With
// synchronous_commit on (set per session), no operation completes before
// COMMIT has returned. Serialization failures, deadlocks and a collection
// created meanwhile by a session that did not take the creation lock (a
// hilo server older than the lock, or an INSERT by hand, which is also
// waited for as before) fail the batch, which then runs again.
//
// Faults: a lost connection fails the batch with UNAVAILABLE, and the next
// batch connects again. A connection lost during COMMIT leaves the outcome
// unknown: every write of the batch fails with UNAVAILABLE (none is ever
// reported applied), and since every batch reads the rows it changes, the
// next allocation starts above whatever that COMMIT did store. Every
// statement, COMMIT included, is bounded (see statement_timeout): a COMMIT
// that waits for a synchronous standby that never comes is cancelled,
// which leaves it committed locally only and answers with a warning; the
// warning fails the writes the same way, and the next batch reads what it
// stored. While commits fail or stall, reachable() is false (health
// NOT_SERVING). A conflict retried after its rollback lost the connection
// fails too. TCP keepalives and tcp_user_timeout (defaults the
// connection string may override) notice a silent database in seconds. A probe
// runs every probe_interval, so `reachable()` is current even when no
// request comes; it also recounts the collections.
//
// Node tags: the store can claim this server's tag in table hilo_nodes, a
// lease the probe renews, so that no two live servers on the database show
// one tag. The tag is not what keeps numbers unique here (the shared row
// is); it tells the IDs of each server apart. A claim is taken over from a
// server that stopped renewing it for the lease's duration (crashed, or cut
// off from the database), and released when the store closes.
//
//   auto store = hilo::PostgresRangeStore::Open(
//       {.uri = "postgresql://hilo@db.internal/hilo"});
//   if (!store.ok()) return store.status();
//   absl::StatusOr<hilo::Range> r =
//       (*store)->Allocate("orders", 32, /*floor=*/0, hilo::NewRangeToken());
//
// Reads (Get, List) and the probe never wait for writes: they run on a
// connection of their own (READ COMMITTED, opened with the first read), in
// batches of their own GroupCommit queue, and see every commit that
// returned before they started; so a flood of ListCollections cannot delay
// an allocation, and the probe's count(*) never lengthens the time a write
// batch holds its row locks.
//
// Thread-safe. Each connection is used by its queue's thread only (a
// GroupCommit runs every batch on a thread of its own), once Open has
// returned.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_RANGE_STORE_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_RANGE_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/store/group_commit.h"
#include "service/store/postgres/postgres_options.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {
class PostgresBatchRunner;
class PostgresCollectionCount;
class PostgresConnection;
struct PostgresRequest;
}  // namespace internal

class PostgresRangeStore final : public RangeStore {
 public:
  // Connects, then creates or checks the schema under an advisory lock, so
  // that servers starting together create it once, then claims the node
  // tag if asked. Errors: UNAVAILABLE if the database cannot be reached;
  // FAILED_PRECONDITION if it holds another application's tables, or a
  // newer hilo schema, or if other live servers hold every tag wanted;
  // INVALID_ARGUMENT for bad options (including a connection string libpq
  // cannot parse).
  static absl::StatusOr<std::unique_ptr<PostgresRangeStore>> Open(
      PostgresRangeStoreOptions options);
  ~PostgresRangeStore() override;

  PostgresRangeStore(const PostgresRangeStore&) = delete;
  PostgresRangeStore& operator=(const PostgresRangeStore&) = delete;

  // RangeStore:
  // Every item in one operation, so in one transaction (and, with the
  // batch it joins, one commit); each still judged alone, in order.
  void ReturnManyAsync(
      std::vector<ReturnItem> items,
      StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) override;
  void GetAsync(absl::string_view collection,
                StoreCallback<std::optional<CollectionState>> done) override;
  void DeleteAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override;
  void RetireAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override;
  int64_t collection_count() const override;
  absl::Status PutForTesting(absl::string_view collection,
                             const CollectionState& state) override;

  // The node tag claimed; empty without node_tag_lease.
  const std::string& node_tag() const { return node_tag_; }
  // Whether the last attempt to use the write connection reached the
  // database. Reads never change it: a read that succeeds says nothing of
  // the write connection (which may be broken while the other is not), and
  // one that fails alone (say, no connection slot left for a second
  // session) does not stop this server handing out ranges, which is what
  // a health check asks. The probe uses the write connection every
  // probe_interval, so this is current when no write comes.
  bool reachable() const { return reachable_.load(); }
  // "postgresql://user@host:port/db", without password or options; what
  // errors and logs name.
  const std::string& description() const { return description_; }

  // What the batches met of other sessions since Open; each a running
  // total, for tests, fuzzing and the curious.
  struct Counters {
    // Operations set aside (to run in a later batch) because a row they
    // write was held by another session, or was being created by one.
    int64_t set_aside = 0;
    // Those of them whose collection another session was creating.
    int64_t creations_set_aside = 0;
    // Operations (and ReturnMany items) failed UNAVAILABLE because the row
    // stayed held for lock_timeout.
    int64_t locked_failures = 0;
    // Runs of a batch repeated after a conflict (serialization failure,
    // deadlock, a collection created meanwhile).
    int64_t conflict_retries = 0;
    // Commits after which a reply waited for the standbys to confirm its
    // reservation (one round trip each, however many standbys, and one
    // more per millisecond while a standby is behind).
    int64_t standby_waits = 0;
  };
  Counters counters() const;

 private:
  using Request = internal::PostgresRequest;

  // RangeStore:
  void DoAllocateAsync(absl::string_view collection, int64_t size,
                       int64_t floor, uint64_t token, int64_t max_floor_jump,
                       bool may_create,
                       StoreCallback<Allocation> done) override;
  void DoReturnAsync(absl::string_view collection, int64_t end, int64_t last,
                     uint64_t token,
                     StoreCallback<ReturnOutcome> done) override;
  void DoListAsync(
      absl::string_view after, int limit,
      StoreCallback<std::vector<NamedCollectionState>> done) override;
  void DoSetFloorAsync(absl::string_view collection, int64_t floor,
                       StoreCallback<FloorOutcome> done) override;

  PostgresRangeStore(PostgresRangeStoreOptions options,
                     std::string description);
  // The batch runner of the write connection (`writes`) or of the read one,
  // with this store's connection, parking, lease and count as its hooks.
  std::unique_ptr<internal::PostgresBatchRunner> MakeRunner(bool writes);
  // Queues `request`; `done` gets its `result` once the batch committed.
  template <typename T>
  void Submit(std::unique_ptr<Request> request, StoreCallback<T> done,
              T Request::*result);
  // A new connection, set up as options_ say.
  absl::StatusOr<std::unique_ptr<internal::PostgresConnection>> Connect() const;
  // On a new write connection: compares the database's history with the
  // recorded one, moving collections on if it changed (postgres_history.h).
  absl::Status CheckHistoryOn(internal::PostgresConnection& c);
  // Records whether the write connection reached the database.
  void SetReachable(bool reachable);
  // Runs the probes, and submits parked requests again when their wait
  // is over.
  void ProbeLoop();
  // Holds `request` (deferred: a row it writes was locked by another
  // session) back for a short, growing wait, then queues it again; fails
  // it at once if the store is closing. A postponed request (see
  // PostgresRequest) waits the shortest time and keeps its count of tries.
  void Park(std::unique_ptr<Request> request, bool postponed);
  // UNAVAILABLE for a deferred operation the closing store will not run.
  absl::Status ClosingError() const;
  // Reports a renewal that found the tag taken, once.
  void NodeTagLost(absl::string_view holder);

  const PostgresRangeStoreOptions options_;
  const std::string description_;
  const Clock* const clock_;
  std::unique_ptr<internal::PostgresCollectionCount> count_;
  std::atomic<bool> reachable_{true};
  std::string node_tag_;  // set by Open
  // A renewal found the claim taken: no more renewals, no release.
  bool node_tag_lost_ = false;  // queue_'s thread only (the renewal's)
  // Writes and the lease's renewal, on queue_'s thread; reads and the
  // probe's count, on read_queue_'s. Destroyed after the queues.
  std::unique_ptr<internal::PostgresBatchRunner> writer_;
  std::unique_ptr<internal::PostgresBatchRunner> reader_;

  base::Mutex probe_mu_;
  bool stopping_ ABSL_GUARDED_BY(probe_mu_) = false;
  bool probe_pending_ ABSL_GUARDED_BY(probe_mu_) = false;
  bool renew_pending_ ABSL_GUARDED_BY(probe_mu_) = false;
  // Requests waiting for a row another session holds, with when each may
  // try again; parked_changed_ wakes the prober for a new one.
  std::vector<std::pair<std::chrono::steady_clock::time_point,
                        std::unique_ptr<Request>>>
      parked_ ABSL_GUARDED_BY(probe_mu_);
  bool parked_changed_ ABSL_GUARDED_BY(probe_mu_) = false;

  // Batches operations into transactions; destroyed before the connection.
  std::unique_ptr<GroupCommit> queue_;
  // The same for reads and probes; destroyed first.
  std::unique_ptr<GroupCommit> read_queue_;
  std::thread prober_;  // started last, stopped first
};

// "postgresql://user@host:port/db" for a libpq connection string, without
// its password or options; INVALID_ARGUMENT if libpq cannot parse it.
absl::StatusOr<std::string> DescribePostgresConnection(absl::string_view uri);

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_RANGE_STORE_H_
