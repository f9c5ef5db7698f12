// Prefetcher: one background thread that fetches ranges ahead of need.
//
// A RangeCache asks for a prefetch from its fast path, once per range, when a
// share of the range is used; Schedule only queues the request, so the caller
// never waits on the network. The thread starts with the first request.
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

  // Fork (fork_guard.h): LockForFork and UnlockAfterFork hold the queue
  // across fork() in the parent; AbandonAfterForkInChild, with it held,
  // drops the queued requests and forgets the parent's thread (the child
  // starts its own on its first request), leaving the mutex fresh and free.
  void LockForFork() ABSL_EXCLUSIVE_LOCK_FUNCTION(mu_);
  void UnlockAfterFork() ABSL_UNLOCK_FUNCTION(mu_);
  void AbandonAfterForkInChild() ABSL_UNLOCK_FUNCTION(mu_);

 private:
  void Run();

  base::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // set under mu_, once started_
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_PREFETCHER_H_
