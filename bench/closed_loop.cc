#include "bench/closed_loop.h"

#include <sys/resource.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/proc_stats.h"

namespace hilo::bench {

int64_t NanosSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start)
      .count();
}

double OwnCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

ClosedLoop::ClosedLoop(int in_flight, IssueFn issue)
    : issue_(std::move(issue)), slots_(in_flight) {}

LoadResult ClosedLoop::RunTimed(absl::Duration warmup, absl::Duration window,
                                const testing_util::ServerProcess& server) {
  StartAll();
  absl::SleepFor(warmup);
  const double server_cpu = CpuSeconds(server.pid());
  const int64_t server_switches = ContextSwitches(server.pid());
  const double client_cpu = OwnCpuSeconds();
  const Clock::time_point begin = Clock::now();
  phase_.store(kMeasuring);
  absl::SleepFor(window);
  phase_.store(kStopping);
  const Clock::time_point end = Clock::now();
  const double server_used = CpuSeconds(server.pid()) - server_cpu;
  const int64_t switches_after = ContextSwitches(server.pid());
  const double client_used = OwnCpuSeconds() - client_cpu;
  WaitAll();
  LoadResult result = Collect(NanosSince(begin, end) / 1e9);
  result.server_cpu = server_used;
  result.client_cpu = client_used;
  if (server_switches >= 0 && switches_after >= server_switches) {
    result.server_switches = switches_after - server_switches;
  }
  return result;
}

LoadResult ClosedLoop::RunCount(int64_t total) {
  limit_ = total;
  phase_.store(kMeasuring);
  const Clock::time_point begin = Clock::now();
  StartAll();
  WaitAll();
  return Collect(NanosSince(begin, Clock::now()) / 1e9);
}

void ClosedLoop::StartAll() {
  {
    base::MutexLock lock(&mu_);
    active_ = static_cast<int>(slots_.size());
  }
  for (size_t i = 0; i < slots_.size(); ++i) Next(static_cast<int>(i));
}

void ClosedLoop::WaitAll() {
  base::MutexLock lock(&mu_);
  mu_.Await([this]()
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; });
}

void ClosedLoop::Next(int i) {
  const int64_t seq = seq_.fetch_add(1, std::memory_order_relaxed);
  if (phase_.load() == kStopping || (limit_ >= 0 && seq >= limit_)) {
    base::MutexLock lock(&mu_);
    --active_;
    return;
  }
  slots_[i].start = Clock::now();
  issue_(i, seq, [this, i](grpc::Status status) { OnDone(i, status); });
}

void ClosedLoop::OnDone(int i, const grpc::Status& status) {
  const Clock::time_point end = Clock::now();
  Slot& slot = slots_[i];
  if (phase_.load() == kMeasuring) {
    slot.latency.Record(NanosSince(slot.start, end));
    ++slot.calls;
    if (!status.ok()) {
      if (slot.errors++ == 0) {
        slot.first_error = absl::StrCat("code ", status.error_code(), ": ",
                                        status.error_message());
      }
    }
  }
  Next(i);
}

LoadResult ClosedLoop::Collect(double seconds) {
  LoadResult result;
  result.seconds = seconds;
  for (const Slot& slot : slots_) {
    result.calls += slot.calls;
    result.errors += slot.errors;
    if (result.first_error.empty()) result.first_error = slot.first_error;
    result.latency.Merge(slot.latency);
  }
  return result;
}

}  // namespace hilo::bench
