#include "service/store/group_commit.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "hilo/base/await.h"

namespace hilo {
namespace {

// Differences of Now() are the time elapsed, whatever the wall clock does.
class SteadyClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(
               std::chrono::steady_clock::now().time_since_epoch());
  }
};

const Clock* DefaultClock() {
  static const SteadyClock* const clock = new SteadyClock();
  return clock;
}

}  // namespace

GroupCommit::GroupCommit(Options options, BatchRunner run_batch)
    : options_(options),
      max_batch_(
          options.max_batch < 1 ? 1 : static_cast<size_t>(options.max_batch)),
      run_batch_(std::move(run_batch)),
      clock_(options.clock != nullptr ? options.clock : DefaultClock()),
      spare_([this] { SpareLoop(); }) {}

GroupCommit::~GroupCommit() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
    if (leading_ && leader_ == std::this_thread::get_id()) {
      // Waiting would never end, and returning would leave this thread
      // running batches of a destroyed queue.
      std::fprintf(stderr,
                   "GroupCommit destroyed by the thread leading it (from a "
                   "completion or a runner); it would wait for itself\n");
      std::abort();
    }
  }
  {
    // A queue a leader left at its bound: the spare takes it now.
    base::MutexLock lock(&spare_mu_);
    spare_hurry_ = true;
  }
  {
    // The thread that leads (a caller, or the spare) commits everything
    // queued, then gives the lead up; nothing queues after stopping_.
    base::MutexLock lock(&mu_);
    mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !leading_ && pending_.empty();
    });
  }
  {
    base::MutexLock lock(&spare_mu_);
    spare_exit_ = true;
  }
  spare_.join();
}

void GroupCommit::Submit(std::unique_ptr<Operation> op) {
  bool lead = false;
  bool wake = false;
  {
    base::MutexLock lock(&mu_);
    if (!stopping_) {
      pending_.push_back(std::move(op));
      op = nullptr;
      if (!leading_) {
        leading_ = true;
        if (options_.mode == Mode::kLeader) {
          leader_ = std::this_thread::get_id();
          lead = true;
        } else {
          leader_ = spare_.get_id();
          wake = true;
        }
      }
    }
  }
  if (op != nullptr) {
    op->done(absl::UnavailableError("the store is closing"));
  } else if (lead) {
    Lead(/*bounded=*/true);
  } else if (wake) {
    WakeSpare();
  }
}

absl::Status GroupCommit::Run(absl::AnyInvocable<absl::Status(Operation&)> body,
                              bool read_only) {
  {
    base::MutexLock lock(&mu_);
    if (leading_ && leader_ == std::this_thread::get_id()) {
      return absl::FailedPreconditionError(
          "GroupCommit::Run called by the thread leading its queue (from a "
          "completion or a runner); it would wait for itself");
    }
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

void GroupCommit::Lead(bool bounded) {
  const absl::Time start = bounded ? clock_->Now() : absl::InfinitePast();
  int batches = 0;
  bool hand_over = false;
  std::vector<std::unique_ptr<Operation>> batch;
  std::vector<Operation*> view;
  while (NextBatch(hand_over, &batch)) {
    for (const std::unique_ptr<Operation>& op : batch) view.push_back(op.get());
    run_batch_(absl::MakeConstSpan(view));
    {
      base::MutexLock lock(&mu_);
      ++commits_;
    }
    // The commit has returned: only now may anyone learn an outcome.
    for (const std::unique_ptr<Operation>& op : batch) {
      op->done(std::move(op->status));
    }
    batch.clear();
    view.clear();
    ++batches;
    if (bounded) {
      hand_over = batches >= options_.max_batches_per_lead ||
                  clock_->Now() - start >= options_.max_lead_time;
    }
  }
  // The lead is gone (to nobody, or to the spare): `this` may already be
  // destroyed, so nothing here may touch it.
}

bool GroupCommit::NextBatch(bool hand_over,
                            std::vector<std::unique_ptr<Operation>>* batch) {
  {
    base::MutexLock lock(&mu_);
    if (pending_.empty()) {
      leading_ = false;
      return false;
    }
    if (!hand_over) {
      while (!pending_.empty() && batch->size() < max_batch_) {
        batch->push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      return true;
    }
    // The next Submit takes the lead; the spare watches in case none comes.
    // It is told before mu_ is released: after that a Submit may take the
    // lead and empty the queue, and the owner may destroy the queue, while
    // this thread has not yet returned.
    leading_ = false;
    WakeSpare();
  }
  return false;
}

void GroupCommit::WakeSpare() {
  base::MutexLock lock(&spare_mu_);
  spare_turn_ = true;
}

void GroupCommit::SpareLoop() {
  while (true) {
    {
      base::MutexLock lock(&spare_mu_);
      spare_mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(spare_mu_) {
        return spare_turn_ || spare_exit_;
      });
      if (!spare_turn_) return;  // the destructor: nothing is queued
      spare_turn_ = false;
    }
    if (options_.mode == Mode::kDedicatedThread) {
      Lead(/*bounded=*/false);
      continue;
    }
    {
      // A leader left at its bound: a Submit within the grace takes the
      // lead on its own thread. This waits on spare_mu_, which Submits do
      // not touch, so it is not woken by each of them.
      base::MutexLock lock(&spare_mu_);
      spare_mu_.AwaitWithTimeout([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                     spare_mu_) { return spare_hurry_; },
                                 options_.spare_grace);
    }
    {
      base::MutexLock lock(&mu_);
      if (leading_ || pending_.empty()) continue;
      leading_ = true;
      leader_ = std::this_thread::get_id();
    }
    Lead(/*bounded=*/true);
  }
}

}  // namespace hilo
