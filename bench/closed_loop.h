// ClosedLoop: hilo_bench's load generator. It keeps a fixed number of
// calls in flight, each slot starting its next call from the completion of
// the previous one, and measures them: calls, errors, latency, and the CPU
// time the server process and this process use meanwhile.
//
//   NextRangeCalls calls(channels, 64, name);     // rpc_calls.h
//   LoadResult r = ClosedLoop(64, calls.Issuer())
//                      .RunTimed(warmup, window, *server);
//   r.rate();  // calls per second
//
// A ClosedLoop runs once. The issuer's calls complete on gRPC's threads;
// the ClosedLoop is safe for that, and its Run* wait for every slot.
#ifndef HILO_BENCH_CLOSED_LOOP_H_
#define HILO_BENCH_CLOSED_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "bench/latency_histogram.h"
#include "grpcpp/support/status.h"
#include "hilo/base/mutex.h"
#include "testing/server_process.h"

namespace hilo::bench {

using Clock = std::chrono::steady_clock;

int64_t NanosSince(Clock::time_point start, Clock::time_point end);

// User + system CPU time of this process so far, in seconds.
double OwnCpuSeconds();

struct LoadResult {
  int64_t calls = 0;   // completed in the measured window
  int64_t errors = 0;  // of those, failed
  std::string first_error;
  double seconds = 0;
  LatencyHistogram latency;
  // CPU time used during the window by the server process and by this
  // process (the load generator); 0 if not measured.
  double server_cpu = 0;
  double client_cpu = 0;
  // Context switches of the server's threads during the window (see
  // ContextSwitches in proc_stats.h); 0 if not measured.
  int64_t server_switches = 0;

  double rate() const { return seconds > 0 ? calls / seconds : 0; }
};

using Done = std::function<void(grpc::Status)>;

// Starts call number `seq` for `slot`; `done` runs exactly once, when it
// ends. A slot never has two calls at once.
using IssueFn = std::function<void(int slot, int64_t seq, Done done)>;

// Keeps `in_flight` calls running: each slot starts its next call from the
// completion of the previous one.
class ClosedLoop {
 public:
  ClosedLoop(int in_flight, IssueFn issue);

  // Runs for `warmup` unmeasured, then measures for `window`, including
  // the CPU time `server` and this process use meanwhile.
  LoadResult RunTimed(absl::Duration warmup, absl::Duration window,
                      const testing_util::ServerProcess& server);

  // Runs calls 0 .. total-1, all measured.
  LoadResult RunCount(int64_t total);

 private:
  enum Phase { kWarmup, kMeasuring, kStopping };
  struct Slot {
    Clock::time_point start;
    LatencyHistogram latency;
    int64_t calls = 0;
    int64_t errors = 0;
    std::string first_error;
  };

  void StartAll();
  void WaitAll();
  void Next(int i);
  void OnDone(int i, const grpc::Status& status);
  LoadResult Collect(double seconds);

  const IssueFn issue_;
  std::vector<Slot> slots_;
  std::atomic<int> phase_{kWarmup};
  std::atomic<int64_t> seq_{0};
  int64_t limit_ = -1;
  base::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hilo::bench

#endif  // HILO_BENCH_CLOSED_LOOP_H_
