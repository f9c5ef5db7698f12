#include "client_cpp/src/prefetcher.h"

#include <new>
#include <utility>

namespace hilo::internal {

Prefetcher::Prefetcher() = default;

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::Schedule(std::function<void()> task) {
  base::MutexLock lock(&mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { Run(); });
  }
}

void Prefetcher::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::LockForFork() { mu_.Lock(); }

void Prefetcher::UnlockAfterFork() { mu_.Unlock(); }

void Prefetcher::AbandonAfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  tasks_.clear();
  started_ = false;
  // The parent's thread: never joined here (it does not exist here).
  new (&thread_) std::thread();
  new (&mu_) base::Mutex();
}

void Prefetcher::Run() {
  while (true) {
    std::function<void()> task;
    {
      base::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(ready);
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace hilo::internal
