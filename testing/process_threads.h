// The threads of this process: their names, and a bounded wait until
// there are few enough of them; the scheduling policy of each thread of a
// process; and a system call refused to one thread. See
// threads_end_before_exit.h for why a test binary waits for that.
//
//   absl::Status s = WaitForThreadCountAtMost(1, absl::Seconds(30));
#ifndef HILO_TESTING_PROCESS_THREADS_H_
#define HILO_TESTING_PROCESS_THREADS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hilo::testing_util {

// The names of this process's threads (/proc/self/task/*/comm), the
// caller's among them. UNAVAILABLE if /proc/self/task cannot be read.
absl::StatusOr<std::vector<std::string>> ThreadNames();

// Returns once this process has at most `threads` threads, looking every few
// milliseconds for up to `timeout`. DEADLINE_EXCEEDED naming the threads
// still running if it does not happen in time.
absl::Status WaitForThreadCountAtMost(int threads, absl::Duration timeout);

// The scheduling policy of every thread of process `pid`, by thread id,
// from each thread's /proc stat (field 41): a thread that ended meanwhile
// is left out, and no other process's thread that took its id is read.
std::map<pid_t, int> ThreadPolicies(pid_t pid);

// Makes system call `nr` fail with `error` on the calling thread and on
// every thread and process it starts from now on, across exec: a seccomp
// filter, as a service manager's system call filter would. The process's
// other threads are untouched. INTERNAL if the kernel refuses the filter.
absl::Status RefuseSystemCallOnThisThread(long nr, int error);

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_PROCESS_THREADS_H_
