#include "client_cpp/src/prefetcher.h"

#include <utility>

namespace hilo::internal {

Prefetcher::Prefetcher() : thread_([this] { Run(); }) {}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::Schedule(std::function<void()> task) {
  base::MutexLock lock(&mu_);
  if (!stopping_) tasks_.push_back(std::move(task));
}

void Prefetcher::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
  }
  if (thread_.joinable()) thread_.join();
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
