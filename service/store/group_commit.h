// GroupCommit: many operations, one transaction, one commit at a time.
//
// A store hands each operation to Submit() and learns its outcome through
// the operation's completion. One committer thread takes the queued
// operations, oldest first and at most `max_batch` of them, and gives them
// to the store's BatchRunner, which runs them in one transaction and
// commits it. Only after the runner has returned, that is after the commit
// is durable or has failed, are the batch's completions called, in the
// order the operations were submitted, on the committer thread. Operations
// submitted while a batch commits wait for the next one, so one commit (one
// fsync) serves every operation that queued in the meantime.
//
// Nothing here knows SQL: the runner decides how each operation is isolated
// (a savepoint, say) and what a failed commit does to the batch.
//
//   GroupCommit queue(256, [&](absl::Span<GroupCommit::Operation* const> b) {
//     Begin(); for (auto* op : b) op->status = op->body(*op); Commit();
//   });
//   queue.Submit(std::move(op));               // returns at once
//   absl::Status s = queue.Run(body, false);   // waits for the commit
//
// Thread-safe. Completions must not block and must not call Run() (they run
// on the committer thread, which would wait for itself). The destructor
// completes every operation already submitted, then stops the thread.
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
    // Runs on the committer thread inside the batch's transaction, as the
    // BatchRunner arranges.
    absl::AnyInvocable<absl::Status(Operation&)> body;
    // The operation writes nothing, so a runner may run it again on its own
    // when its batch's transaction fails.
    bool read_only = false;
    // Called exactly once with `status`, after the batch's commit returned.
    absl::AnyInvocable<void(absl::Status)> done;
    // The outcome: set by the BatchRunner.
    absl::Status status;
    // Rows the body created, for the store's own bookkeeping.
    int64_t rows_created = 0;
  };

  // Runs one batch (1 to max_batch operations, oldest first) in one
  // transaction and sets each operation's status. Called on the committer
  // thread only, one batch at a time.
  using BatchRunner = std::function<void(absl::Span<Operation* const> batch)>;

  // `max_batch` >= 1.
  GroupCommit(int max_batch, BatchRunner run_batch);
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues `op` for the next batch and returns at once.
  void Submit(std::unique_ptr<Operation> op);

  // Queues `body` and waits until its batch is committed; its status.
  absl::Status Run(absl::AnyInvocable<absl::Status(Operation&)> body,
                   bool read_only);

  // Batches committed (or failed) so far.
  int64_t commits() const;

  // Blocks until at least `n` operations wait for a batch.
  void WaitForPendingForTesting(size_t n);

 private:
  void CommitLoop();

  const size_t max_batch_;
  const BatchRunner run_batch_;

  mutable base::Mutex mu_;
  std::deque<std::unique_ptr<Operation>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread committer_;  // last: starts once the rest is ready
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_GROUP_COMMIT_H_
