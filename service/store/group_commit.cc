#include "service/store/group_commit.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "hilo/base/await.h"
#include "service/store/completion_batch.h"

namespace hilo {

GroupCommit::GroupCommit(Options options, BatchRunner run_batch)
    : max_batch_(
          options.max_batch < 1 ? 1 : static_cast<size_t>(options.max_batch)),
      run_batch_(std::move(run_batch)),
      thread_([this] { CommitLoop(); }) {}

GroupCommit::~GroupCommit() {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // Joining would never end, and returning would leave this thread
    // running batches of a destroyed queue.
    std::fprintf(stderr,
                 "GroupCommit destroyed by its own thread (from a completion "
                 "or a runner); it would wait for itself\n");
    std::abort();
  }
  {
    // The thread commits everything queued, then returns; nothing queues
    // after stopping_.
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void GroupCommit::Submit(std::unique_ptr<Operation> op) {
  {
    base::MutexLock lock(&mu_);
    if (!stopping_) {
      pending_.push_back(std::move(op));
      return;
    }
  }
  op->done(absl::UnavailableError("the store is closing"));
}

absl::Status GroupCommit::Run(absl::AnyInvocable<absl::Status(Operation&)> body,
                              bool read_only) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    return absl::FailedPreconditionError(
        "GroupCommit::Run called by the queue's own thread (from a "
        "completion or a runner); it would wait for itself");
  }
  auto op = std::make_unique<Operation>();
  op->body = std::move(body);
  op->read_only = read_only;
  return base::Await<absl::Status>(
      [&](absl::AnyInvocable<void(absl::Status)> done) {
        op->done = std::move(done);
        Submit(std::move(op));
      });
}

int64_t GroupCommit::commits() const {
  base::MutexLock lock(&mu_);
  return commits_;
}

void GroupCommit::WaitForPendingForTesting(size_t n) {
  base::MutexLock lock(&mu_);
  mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_.size() >= n;
  });
}

void GroupCommit::CommitLoop() {
  std::vector<std::unique_ptr<Operation>> batch;
  std::vector<Operation*> view;
  while (true) {
    {
      base::MutexLock lock(&mu_);
      mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !pending_.empty() || stopping_;
      });
      if (pending_.empty()) return;  // the destructor, and all is committed
      while (!pending_.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
    }
    for (const std::unique_ptr<Operation>& op : batch) view.push_back(op.get());
    run_batch_(absl::MakeConstSpan(view));
    {
      base::MutexLock lock(&mu_);
      ++commits_;
    }
    // The commit has returned: only now may anyone learn an outcome. Two
    // or more completions run as one CompletionBatch, so what they start
    // can wait for the last of them (a connection's replies leave
    // together); a lone completion has nothing to wait for.
    {
      std::optional<CompletionBatch> together;
      if (batch.size() > 1) together.emplace();
      for (const std::unique_ptr<Operation>& op : batch) {
        op->done(std::move(op->status));
      }
    }
    batch.clear();
    view.clear();
  }
}

}  // namespace hilo
