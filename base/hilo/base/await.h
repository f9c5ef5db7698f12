// Await: turn a call that reports through a callback into one that waits.
//
//   absl::Status s = hilo::base::Await<absl::Status>(
//       [&](absl::AnyInvocable<void(absl::Status)> done) {
//         service.NextRange(request, &response, std::move(done));
//       });
//
// The callback may run on any thread, before or after `start` returns, but
// exactly once. For tests, tools and synchronous wrappers; code on a hot
// path passes its own callback instead of waiting.
#ifndef HILO_BASE_HILO_BASE_AWAIT_H_
#define HILO_BASE_HILO_BASE_AWAIT_H_

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"

namespace hilo::base {

template <typename T>
T Await(absl::FunctionRef<void(absl::AnyInvocable<void(T)>)> start) {
  std::mutex mu;
  std::condition_variable finished;
  std::optional<T> result;
  start([&](T value) {
    // Under the lock: once the waiter sees a result it returns and destroys
    // `finished`, which must not be touched after that.
    std::lock_guard<std::mutex> lock(mu);
    result.emplace(std::move(value));
    finished.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  finished.wait(lock, [&] { return result.has_value(); });
  return *std::move(result);
}

}  // namespace hilo::base

#endif  // HILO_BASE_HILO_BASE_AWAIT_H_
