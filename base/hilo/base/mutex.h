// hilo::base::Mutex: a mutex with absl::Mutex's Await, that ThreadSanitizer
// can see.
//
// Debian's Abseil is built without TSan, so TSan cannot see absl::Mutex hand
// data from thread to thread and reports races that are not there. This
// mutex is std::mutex plus a condition variable, both visible to TSan, with
// the part of absl::Mutex's interface hilo uses: Lock, Unlock, a scoped
// MutexLock, and Await(predicate), which blocks until the predicate holds.
// Every Unlock wakes the waiters to re-check their predicates, as absl does,
// so code never signals by hand. It keeps Abseil's thread-safety annotations.
//
//   hilo::base::Mutex mu_;
//   bool ready_ ABSL_GUARDED_BY(mu_) = false;
//   ...
//   hilo::base::MutexLock lock(&mu_);
//   mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_; });
#ifndef HILO_BASE_MUTEX_H_
#define HILO_BASE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace hilo::base {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    // Before unlocking, never after: a waiter that sees its predicate hold
    // may return and destroy this mutex (a Notification on its stack, say)
    // the moment the lock is free, and notify_all would then touch a freed
    // condition variable. Cheap when nobody waits: no system call.
    waiters_.notify_all();
    mu_.unlock();
  }

  // Releases the mutex until `predicate()` is true, then holds it again.
  // `predicate` runs with the mutex held; a lambda that reads guarded
  // fields says so with ABSL_EXCLUSIVE_LOCKS_REQUIRED (as above), which
  // clang then checks in the lambda's body. Await's own body is not analysed:
  // clang cannot tell that `this` is the `mu_` the lambda names. Callers are
  // checked to hold the mutex.
  template <typename Predicate>
  void Await(Predicate predicate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (predicate()) return;
    // Waiting releases the mutex, which is an Unlock for everyone else:
    // what this thread changed so far may be what they wait for.
    waiters_.notify_all();
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    waiters_.wait(lock, predicate);
    lock.release();
  }

  // As Await, but gives up after `timeout`; returns what `predicate()`
  // last returned.
  template <typename Predicate>
  bool AwaitWithTimeout(Predicate predicate, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (predicate()) return true;
    waiters_.notify_all();
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    const bool result =
        waiters_.wait_for(lock, absl::ToChronoNanoseconds(timeout), predicate);
    lock.release();
    return result;
  }

 private:
  std::mutex mu_;
  std::condition_variable waiters_;
};

// Holds a Mutex for its lifetime.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace hilo::base

#endif  // HILO_BASE_MUTEX_H_
