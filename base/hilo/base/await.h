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

#include <optional>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "hilo/base/mutex.h"

namespace hilo::base {

template <typename T>
T Await(absl::FunctionRef<void(absl::AnyInvocable<void(T)>)> start) {
  Mutex mu;
  // Read and written under `mu` (ABSL_GUARDED_BY applies to members only).
  std::optional<T> result;
  start([&](T value) {
    // Mutex::Unlock wakes the waiter before it unlocks: once the waiter
    // sees a result it returns and destroys `mu`.
    MutexLock lock(&mu);
    result.emplace(std::move(value));
  });
  MutexLock lock(&mu);
  mu.Await([&] { return result.has_value(); });
  return *std::move(result);
}

}  // namespace hilo::base

#endif  // HILO_BASE_HILO_BASE_AWAIT_H_
