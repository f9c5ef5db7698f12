// GroupCommit: many operations, one transaction, one commit at a time.
//
// A store hands each operation to Submit() and learns its outcome through
// the operation's completion. Whichever thread holds the lead takes the
// queued operations, oldest first and at most `max_batch` of them, and
// gives them to the store's BatchRunner, which runs them in one transaction
// and commits it. Only after the runner has returned, that is after the
// commit is durable or has failed, are the batch's completions called, in
// the order the operations were submitted, on the thread that ran the
// batch. Operations submitted while a batch commits wait for the next one,
// so one commit (one fsync) serves every operation that queued in the
// meantime. At most one thread is inside the runner at any moment, and each
// batch's runner call happens after the previous batch's completions
// returned: the runner may use one connection without a lock of its own.
//
// Who leads depends on the mode the store chooses:
//
// - kLeader (LevelDB's DBImpl::Write, RocksDB's WriteThread): a Submit that
//   finds no batch in flight makes its caller the leader. It runs the batch
//   on its own thread and completes it before Submit returns, so an
//   operation that can commit at once crosses no thread. Submits that
//   arrive while a leader commits only queue and return at once (no
//   wake-up, no wait). A leader whose batch is done runs the next one if
//   more wait, but it leaves after `max_batches_per_lead` batches or once
//   `max_lead_time` has passed since it began leading, whichever comes
//   first (checked between batches). What is still queued then goes to the
//   next Submit, which takes the lead as if nothing were in flight, so
//   under steady load the commits move from caller to caller and no
//   operation crosses a thread. Only if no Submit comes within
//   `spare_grace` does a spare thread, parked until then, take the lead
//   (bounded the same way), so nothing queued waits for a future Submit.
//   Under light load the spare is never woken. A caller that leads blocks
//   its thread for one commit and for at most the bound after it.
// - kDedicatedThread: the spare thread is the only one that commits; a
//   Submit only queues (and wakes the thread if it was idle). For stores
//   whose commit is too slow to run on a caller's thread (a network round
//   trip), whose callers must never block, or whose commit is so quick
//   that a leading caller would commit before the requests that arrived
//   with its own are queued (SQLite without fsync), so every batch would
//   hold one.
//
// Nothing here knows SQL: the runner decides how each operation is isolated
// (a savepoint, say) and what a failed commit does to the batch.
//
//   GroupCommit queue({.mode = GroupCommit::Mode::kLeader, .max_batch = 256},
//                     [&](absl::Span<GroupCommit::Operation* const> b) {
//     Begin(); for (auto* op : b) op->status = op->body(*op); Commit();
//   });
//   queue.Submit(std::move(op));               // may commit it right here
//   absl::Status s = queue.Run(body, false);   // waits for the commit
//
// Thread-safe. Completions and runners must not block on something only a
// later Submit can bring, and must not call Run() or destroy the queue
// (they run on the leading thread, which would wait for itself; Run() then
// answers FAILED_PRECONDITION instead). A completion may Submit: the
// operation joins a later batch. The destructor completes every operation
// already submitted (committing it, even if a leader is committing on
// another thread at the time), refuses later ones with UNAVAILABLE "the
// store is closing", then stops the spare thread.
#ifndef HILO_SERVICE_STORE_GROUP_COMMIT_H_
#define HILO_SERVICE_STORE_GROUP_COMMIT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"

namespace hilo {

class GroupCommit {
 public:
  // A store may derive its own operations from it, carrying what its
  // BatchRunner needs.
  struct Operation {
    virtual ~Operation() = default;
    // Runs inside the batch's transaction, on the leading thread, as the
    // BatchRunner arranges.
    absl::AnyInvocable<absl::Status(Operation&)> body;
    // The operation writes nothing, so a runner may run it again on its own
    // when its batch's transaction fails.
    bool read_only = false;
    // Called exactly once with `status`, after the batch's commit returned.
    absl::AnyInvocable<void(absl::Status)> done;
    // The outcome: set by the BatchRunner.
    absl::Status status;
  };

  // Runs one batch (1 to max_batch operations, oldest first) in one
  // transaction and sets each operation's status. Called by the leading
  // thread, one batch at a time (see the class comment).
  using BatchRunner = std::function<void(absl::Span<Operation* const> batch)>;

  enum class Mode {
    // The submitting thread commits when no batch is in flight.
    kLeader,
    // Only the queue's own thread commits.
    kDedicatedThread,
  };

  struct Options {
    Mode mode = Mode::kLeader;
    // Most operations in one batch; at least 1.
    int max_batch = 256;
    // kLeader: a caller leads at most this many batches (at least 1; its
    // own is the first) ...
    int max_batches_per_lead = 8;
    // ... and starts no new batch once this long has passed since it took
    // the lead.
    absl::Duration max_lead_time = absl::Milliseconds(2);
    // Measures max_lead_time; only differences of Now() are used. Null: a
    // monotonic clock (std::chrono::steady_clock).
    const Clock* clock = nullptr;
    // kLeader: how long operations a leader left at its bound wait for a
    // Submit to take the lead before the spare thread takes it (measured by
    // the spare's own timed wait, not `clock`).
    absl::Duration spare_grace = absl::Microseconds(500);
  };

  GroupCommit(Options options, BatchRunner run_batch);
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues `op` for the next batch. kLeader: if no batch is in flight, runs
  // it (and what queues behind it, within the bound) on this thread and
  // completes it before returning; otherwise returns at once.
  // kDedicatedThread: always returns at once.
  void Submit(std::unique_ptr<Operation> op);

  // Queues `body` and waits until its batch is committed; its status. May
  // lead, as Submit. FAILED_PRECONDITION if called from a completion or a
  // runner of this queue (it would wait for itself).
  absl::Status Run(absl::AnyInvocable<absl::Status(Operation&)> body,
                   bool read_only);

  // Batches committed (or failed) so far.
  int64_t commits() const;

  // Blocks until at least `n` operations wait for a batch.
  void WaitForPendingForTesting(size_t n);

 private:
  // Runs batches on this thread, which holds the lead, until the queue is
  // empty or, if `bounded`, the bound is reached; then gives the lead up
  // (to the next Submit, or after spare_grace to the spare thread).
  void Lead(bool bounded);
  // Takes the next batch into `batch`. False if the lead ended: the queue
  // was empty, or, when `hand_over`, it was left to the next Submit (and
  // the spare told to watch it).
  bool NextBatch(bool hand_over,
                 std::vector<std::unique_ptr<Operation>>* batch);
  // Wakes the spare thread: to watch a queue left without a leader
  // (kLeader), or to take the lead (kDedicatedThread). Takes spare_mu_, so
  // it may be called with mu_ held (mu_ before spare_mu_, never the other
  // way).
  void WakeSpare();
  // The spare thread: parked until WakeSpare. kDedicatedThread: leads
  // unbounded. kLeader: waits spare_grace, then leads (bounded) if the
  // queue is still without a leader.
  void SpareLoop();

  const Options options_;
  const size_t max_batch_;
  const BatchRunner run_batch_;
  const Clock* const clock_;

  mutable base::Mutex mu_;
  std::deque<std::unique_ptr<Operation>> pending_ ABSL_GUARDED_BY(mu_);
  // A thread (a caller or the spare) holds the lead: it runs batches until
  // the queue is empty or its bound. False while operations are pending
  // only after a leader left at its bound, and then the spare watches the
  // queue, so nothing queued waits for a future Submit.
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  // The thread holding the lead, while leading_.
  std::thread::id leader_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;

  // The spare parks on a mutex of its own, which Submits take only to wake
  // it: on mu_, each Submit's Unlock would evaluate the spare's predicate.
  base::Mutex spare_mu_;
  bool spare_turn_ ABSL_GUARDED_BY(spare_mu_) = false;
  // The destructor: the spare stops waiting out its grace.
  bool spare_hurry_ ABSL_GUARDED_BY(spare_mu_) = false;
  bool spare_exit_ ABSL_GUARDED_BY(spare_mu_) = false;
  std::thread spare_;  // last: starts once the rest is ready
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_GROUP_COMMIT_H_
