// Prefetcher: one background thread that fetches ranges ahead of need.
//
// A RangeCache asks for a prefetch from its fast path, once per range, when a
// share of the range is used; Schedule only queues the request, so the caller
// never waits on the network.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_PREFETCHER_H_
#define HILO_CLIENT_CPP_SRC_PREFETCHER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "hilo/base/mutex.h"

namespace hilo::internal {

class Prefetcher {
 public:
  Prefetcher();
  // Stops (see Stop).
  ~Prefetcher();

  // Queues `task` to run on the background thread. Dropped after Stop.
  void Schedule(std::function<void()> task);

  // Lets the running task finish, drops the queued ones and joins the
  // thread. Idempotent.
  void Stop();

 private:
  void Run();

  base::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_PREFETCHER_H_
