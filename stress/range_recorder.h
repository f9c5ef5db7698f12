// RangeRecorder: every NextRange reply and every return (a ReturnRange, or
// an item of a ReturnRanges batch) a process's gRPC clients see, recorded by
// a global client interceptor, so a test can check
// the IDs an unmodified hilo::Client hands out against the ranges it was
// really given.
//
//   RangeRecorder* recorder = RangeRecorder::Install();  // before any channel
//   ... use hilo::Client ...
//   std::vector<RangeEvent> events = recorder->Events();
//
// A range is recorded when its reply arrives with status OK, before the
// client sees it; a return is recorded before its request leaves (so a
// return the server applied is always in the log) and again with its
// outcome. Replies that arrive after the call's deadline are dropped by gRPC
// and never recorded, as they never reach the client. Optionally every event
// is also appended, as a line (FormatEvent), to a file descriptor, so
// another process can follow it while this one runs.
//
// Thread-safe.
#ifndef HILO_STRESS_RANGE_RECORDER_H_
#define HILO_STRESS_RANGE_RECORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "hilo/base/mutex.h"
#include "stress/range_log.h"

namespace hilo::stress {

class RangeRecorder {
 public:
  // Registers the process-wide interceptor on the first call and returns
  // the recorder; later calls return the same one. Only channels created
  // after the first call are seen.
  static RangeRecorder* Install();

  // Also append every event, as a line, to `fd` (-1 for none).
  void SetLogFd(int fd);

  // Every event so far, in the order they happened.
  std::vector<RangeEvent> Events() const;
  // Forgets the events (not the counts).
  void Clear();

  // How many NextRange / ReturnRange calls ended with each status code.
  std::map<int, int64_t> NextRangeCodes() const;
  std::map<int, int64_t> ReturnRangeCodes() const;

  // Called by the interceptor.
  void Add(const RangeEvent& event);
  void CountNextRange(int code);
  void CountReturnRange(int code);

 private:
  RangeRecorder() = default;

  mutable base::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<RangeEvent> events_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> next_codes_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> return_codes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_RANGE_RECORDER_H_
