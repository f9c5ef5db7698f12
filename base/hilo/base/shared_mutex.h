// hilo::base::SharedMutex: a reader-writer mutex with thread-safety
// annotations, that ThreadSanitizer can see.
//
// For data that many threads read at once and few write, where readers
// must not wait for one another (the client's map of collections, looked up
// on every call). It is std::shared_mutex, which TSan sees, with the part of
// absl::Mutex's reader-writer interface hilo uses and Abseil's annotations,
// so clang checks that a field it guards is read under at least a reader
// lock and written under the writer lock. It has no Await: code that waits
// for a condition uses base::Mutex.
//
//   hilo::base::SharedMutex mu;
//   std::map<std::string, int> table ABSL_GUARDED_BY(mu);
//   ...
//   {
//     hilo::base::ReaderMutexLock lock(&mu);
//     auto it = table.find(key);  // reading: other readers may hold it too
//   }
//   hilo::base::WriterMutexLock lock(&mu);
//   table[key] = 1;  // writing: nobody else holds it
#ifndef HILO_BASE_SHARED_MUTEX_H_
#define HILO_BASE_SHARED_MUTEX_H_

#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace hilo::base {

class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // Exclusive (writer) lock.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

  // Shared (reader) lock: any number of threads may hold it together, but
  // not while one holds the writer lock.
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex's reader lock for its lifetime.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex's writer lock for its lifetime.
class ABSL_SCOPED_LOCKABLE WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~WriterMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace hilo::base

#endif  // HILO_BASE_SHARED_MUTEX_H_
