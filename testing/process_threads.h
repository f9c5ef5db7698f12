// The threads of this process: their names, and a bounded wait until
// there are few enough of them. See threads_end_before_exit.h for why a
// test binary waits for that.
//
//   absl::Status s = WaitForThreadCountAtMost(1, absl::Seconds(30));
#ifndef HILO_TESTING_PROCESS_THREADS_H_
#define HILO_TESTING_PROCESS_THREADS_H_

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

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_PROCESS_THREADS_H_
