#include "service/rpc/idle_connection_closer.h"

#include <utility>

namespace hilo {

IdleConnectionCloser::IdleConnectionCloser(
    std::function<int64_t()> calls_inside, std::function<void()> close,
    absl::Duration settle)
    : calls_inside_(std::move(calls_inside)), close_(std::move(close)) {
  thread_ = std::thread([this, settle] { Watch(settle); });
}

IdleConnectionCloser::~IdleConnectionCloser() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void IdleConnectionCloser::Watch(absl::Duration settle) {
  {
    base::MutexLock lock(&mu_);
    const auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_;
    };
    if (mu_.AwaitWithTimeout(stopping, settle)) return;
    while (calls_inside_() != 0) {
      if (mu_.AwaitWithTimeout(stopping, kPoll)) return;
    }
  }
  // No call is in the services: nothing is left to be graceful to.
  close_();
}

}  // namespace hilo
