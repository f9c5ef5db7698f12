#include "client_cpp/src/range_source.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace hilo::internal {

void ForEachInParallel(size_t n, size_t threads,
                       absl::FunctionRef<void(size_t)> fn) {
  if (n == 0) return;
  std::atomic<size_t> next{0};
  auto work = [&next, n, fn] {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i);
    }
  };
  const size_t helpers = std::min(std::max<size_t>(threads, 1), n) - 1;
  std::vector<std::thread> started;
  started.reserve(helpers);
  for (size_t i = 0; i < helpers; ++i) {
    try {
      started.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // out of threads: the ones running (and this one) do it all
    }
  }
  work();
  for (std::thread& thread : started) thread.join();
}

std::vector<absl::StatusOr<ReturnResult>> RangeSource::ReturnMany(
    absl::Span<const ReturnRequest> items) {
  // Threads (this one included) that send returns at once. Against a local
  // server, 10,000 returns took 15 s on 1 thread, 2.1 s on 32, 1.6 s on 64,
  // 1.4 s on 128 and 1.7 s on 256 (2 busy cores; from 64 on the machine's
  // CPU, not the waiting, is what limits it).
  constexpr size_t kReturnThreads = 64;
  std::vector<absl::StatusOr<ReturnResult>> results(
      items.size(), absl::UnknownError("not sent"));
  // One task per collection, so that its items go in order.
  absl::flat_hash_map<absl::string_view, size_t> task_of;
  std::vector<std::vector<size_t>> tasks;
  for (size_t i = 0; i < items.size(); ++i) {
    auto [it, added] = task_of.try_emplace(items[i].collection, tasks.size());
    if (added) tasks.emplace_back();
    tasks[it->second].push_back(i);
  }
  ForEachInParallel(tasks.size(), kReturnThreads, [&](size_t t) {
    for (size_t i : tasks[t]) {
      results[i] = Return(items[i].collection, *items[i].range, items[i].last);
    }
  });
  return results;
}

}  // namespace hilo::internal
