// GroupCommit: many operations, one transaction, one commit at a time.
//
// A store hands each operation to Submit() and learns its outcome through
// the operation's completion. A thread of the queue's own takes the queued
// operations, oldest first and at most `max_batch` of them, and gives them
// to the store's BatchRunner, which runs them in one transaction and
// commits it. Only after the runner has returned, that is after the commit
// is durable or has failed, are the batch's completions called, in the
// order the operations were submitted, on that same thread (two or more
// of them inside one CompletionBatch). Operations
// submitted while a batch commits wait for the next one, so one commit (one
// fsync) serves every operation that queued in the meantime. The thread
// runs batches until nothing waits, then sleeps until the next Submit.
// Submit only queues (and wakes the thread if it slept): no caller ever
// runs a batch or waits for a commit it did not ask to wait for, however
// slow the commit (a network round trip). Only that thread is ever inside
// the runner, and each batch's runner call happens after the previous
// batch's completions returned: the runner may use one connection without
// a lock of its own.
//
// Nothing here knows SQL: the runner decides how each operation is isolated
// (a savepoint, say) and what a failed commit does to the batch. A mode in
// which the submitting caller committed its own batch (LevelDB's
// DBImpl::Write) was measured against this one and removed (BENCHMARKS.md,
// History, 2026-12-02 and 2026-12-03).
//
//   GroupCommit queue({.max_batch = 256},
//                     [&](absl::Span<GroupCommit::Operation* const> b) {
//     Begin(); for (auto* op : b) op->status = op->body(*op); Commit();
//   });
//   queue.Submit(std::move(op));               // returns at once
//   absl::Status s = queue.Run(body, false);   // waits for the commit
//
// Thread-safe. Completions and runners must not block on something only a
// later Submit can bring, and must not call Run() or destroy the queue
// (they run on the queue's thread, which would wait for itself; Run() then
// answers FAILED_PRECONDITION instead). A completion may Submit: the
// operation joins a later batch. The destructor completes every operation
// already submitted (committing it, even if a batch is committing at the
// time), refuses later ones with UNAVAILABLE "the store is closing", then
// stops the thread.
#ifndef HILO_SERVICE_STORE_GROUP_COMMIT_H_
#define HILO_SERVICE_STORE_GROUP_COMMIT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "hilo/base/mutex.h"

namespace hilo {

class GroupCommit {
 public:
  // A store may derive its own operations from it, carrying what its
  // BatchRunner needs.
  struct Operation {
    virtual ~Operation() = default;
    // Runs inside the batch's transaction, on the queue's thread, as the
    // BatchRunner arranges.
    absl::AnyInvocable<absl::Status(Operation&)> body;
    // The operation writes nothing, so a runner may run it again on its own
    // when its batch's transaction fails.
    bool read_only = false;
    // Called exactly once with `status`, after the batch's commit returned;
    // or, refused by a queue that is closing, by Submit on its caller with
    // UNAVAILABLE before it returns.
    absl::AnyInvocable<void(absl::Status)> done;
    // The outcome: set by the BatchRunner.
    absl::Status status;
  };

  // Runs one batch (1 to max_batch operations, oldest first) in one
  // transaction and sets each operation's status. Called by the queue's
  // thread, one batch at a time (see the class comment).
  using BatchRunner = std::function<void(absl::Span<Operation* const> batch)>;

  struct Options {
    // Most operations in one batch; at least 1.
    int max_batch = 256;
  };

  GroupCommit(Options options, BatchRunner run_batch);
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues `op` for the next batch and returns at once (once the queue is
  // closing, completes it with UNAVAILABLE instead).
  void Submit(std::unique_ptr<Operation> op);

  // Queues `body` and waits until its batch is committed; its status.
  // FAILED_PRECONDITION if called from a completion or a runner of this
  // queue (it would wait for itself).
  absl::Status Run(absl::AnyInvocable<absl::Status(Operation&)> body,
                   bool read_only);

  // Batches committed (or failed) so far.
  int64_t commits() const;

  // Blocks until at least `n` operations wait for a batch.
  void WaitForPendingForTesting(size_t n);

 private:
  // The queue's thread: sleeps until operations are pending, runs batches
  // until none are, and returns once the destructor has begun and nothing
  // is pending. It waits on mu_ only while nothing is pending: a Submit
  // made while it runs batches finds no waiter to evaluate (base::Mutex
  // evaluates waiters' predicates at each Unlock).
  void CommitLoop();

  const size_t max_batch_;
  const BatchRunner run_batch_;

  mutable base::Mutex mu_;
  std::deque<std::unique_ptr<Operation>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_GROUP_COMMIT_H_
