// hilo::base::Mutex: a mutex with absl::Mutex's Await, that ThreadSanitizer
// can see.
//
// Debian's Abseil is built without TSan, so TSan cannot see absl::Mutex hand
// data from thread to thread and reports races that are not there. This
// mutex is std::mutex plus a condition variable per waiting thread, all
// visible to TSan, with the part of absl::Mutex's interface hilo uses: Lock,
// Unlock, a scoped MutexLock, and Await(predicate), which blocks until the
// predicate holds. As in absl, the thread that unlocks evaluates the
// predicates of the threads that wait, still holding the lock, and wakes
// only those whose predicate now holds: code never signals by hand, and a
// thread that waits for something rare (a stop flag, say) is not woken by
// every Unlock of a mutex that a hot path takes. It keeps Abseil's
// thread-safety annotations.
//
//   hilo::base::Mutex mu_;
//   bool ready_ ABSL_GUARDED_BY(mu_) = false;
//   ...
//   hilo::base::MutexLock lock(&mu_);
//   mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_; });
//
// A predicate therefore runs on whichever thread holds the mutex: it may
// read what the mutex guards and the waiter's locals, but must not depend on
// the thread it runs on; a lock it takes must come after this mutex in the
// lock order (a thread that held it while unlocking this mutex would wait
// for itself).
#ifndef HILO_BASE_MUTEX_H_
#define HILO_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
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
    // the moment the lock is free. Nothing to do when nobody waits.
    if (waiters_ != nullptr) WakeReady();
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
    Wait(predicate, nullptr);
  }

  // As Await, but gives up after `timeout`; returns what `predicate()`
  // last returned.
  template <typename Predicate>
  bool AwaitWithTimeout(Predicate predicate, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (predicate()) return true;
    const std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    return Wait(predicate, &deadline);
  }

 private:
  // A thread blocked in Await: on its stack, linked into waiters_ while it
  // waits. Every field is read and written under mu_.
  struct Waiter {
    explicit Waiter(absl::FunctionRef<bool()> p) : predicate(p) {}

    absl::FunctionRef<bool()> predicate;
    std::condition_variable wake;
    // Set by the unlocker that found `predicate` true and notified `wake`;
    // cleared by the waiter if, once it holds the mutex again, the
    // predicate is false after all (another thread got there first).
    bool woken = false;
    Waiter* prev = nullptr;
    Waiter* next = nullptr;
  };

  // Blocks until `predicate()` holds or `deadline` (if any) passes; returns
  // its last value. The caller holds mu_ and has seen the predicate false.
  bool Wait(absl::FunctionRef<bool()> predicate,
            const std::chrono::steady_clock::time_point* deadline);
  // Notifies each waiter whose predicate holds. Called with mu_ held.
  void WakeReady();

  std::mutex mu_;
  Waiter* waiters_ = nullptr;  // guarded by mu_
};

inline void Mutex::WakeReady() {
  for (Waiter* w = waiters_; w != nullptr; w = w->next) {
    if (!w->woken && w->predicate()) {
      w->woken = true;
      w->wake.notify_one();
    }
  }
}

inline bool Mutex::Wait(absl::FunctionRef<bool()> predicate,
                        const std::chrono::steady_clock::time_point* deadline) {
  // Waiting releases the mutex, which is an Unlock for everyone else: what
  // this thread changed so far may be what they wait for.
  WakeReady();
  Waiter self(predicate);
  self.next = waiters_;
  if (waiters_ != nullptr) waiters_->prev = &self;
  waiters_ = &self;
  std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
  bool holds = false;
  do {
    // The caller saw the predicate false, and every Unlock since that could
    // change it evaluates it for this waiter.
    self.woken = false;
    if (deadline == nullptr) {
      self.wake.wait(lock);
    } else if (self.wake.wait_until(lock, *deadline) ==
               std::cv_status::timeout) {
      holds = predicate();
      break;
    }
  } while (!(holds = predicate()));
  if (self.prev != nullptr) self.prev->next = self.next;
  if (self.next != nullptr) self.next->prev = self.prev;
  if (waiters_ == &self) waiters_ = self.next;
  lock.release();
  return holds;
}

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
