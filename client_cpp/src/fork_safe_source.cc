#include "client_cpp/src/fork_safe_source.h"

#include <new>
#include <utility>

namespace hilo::internal {

ForkSafeSource::ForkSafeSource(Factory make) : make_(std::move(make)) {
  current_.store(make_().release(), std::memory_order_relaxed);
  generation_.store(ForkGeneration(), std::memory_order_release);
  RegisterForFork(this);
}

ForkSafeSource::~ForkSafeSource() {
  UnregisterForFork(this);
  // A parent's source holds the parent's threads: joining them here would
  // never end. It is left as it is.
  if (generation_.load(std::memory_order_acquire) == ForkGeneration()) {
    delete current_.load(std::memory_order_relaxed);
  }
}

RangeSource* ForkSafeSource::Current() const {
  if (generation_.load(std::memory_order_acquire) == ForkGeneration()) {
    return current_.load(std::memory_order_relaxed);
  }
  base::MutexLock lock(&mu_);
  const uint64_t now = ForkGeneration();
  if (generation_.load(std::memory_order_relaxed) != now) {
    // The old source stays allocated and untouched (see the class comment).
    current_.store(make_().release(), std::memory_order_relaxed);
    generation_.store(now, std::memory_order_release);
  }
  return current_.load(std::memory_order_relaxed);
}

absl::StatusOr<IssuedRange> ForkSafeSource::Next(
    absl::string_view collection, const PreviousRange& previous) {
  return Current()->Next(collection, previous);
}

absl::StatusOr<ReturnResult> ForkSafeSource::Return(
    absl::string_view collection, const IssuedRange& range, int64_t last) {
  return Current()->Return(collection, range, last);
}

std::vector<absl::StatusOr<ReturnResult>> ForkSafeSource::ReturnMany(
    absl::Span<const ReturnRequest> items) {
  return Current()->ReturnMany(items);
}

std::string ForkSafeSource::Describe() const { return Current()->Describe(); }

int64_t ForkSafeSource::failovers() const { return Current()->failovers(); }

void ForkSafeSource::BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Lock(); }

void ForkSafeSource::AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  mu_.Unlock();
}

void ForkSafeSource::AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Fresh and free: the mutex's waiters were the parent's threads.
  new (&mu_) base::Mutex();
}

}  // namespace hilo::internal
