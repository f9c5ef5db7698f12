#include "stress/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hilo/client.h"
#include "stress/checks.h"
#include "stress/code_counts.h"
#include "stress/id_ledger.h"
#include "stress/range_recorder.h"
#include "stress/worker_files.h"

namespace hilo::stress {
namespace {

std::atomic<bool> stop_requested{false};

void OnStopSignal(int) { stop_requested.store(true); }

struct ThreadStats {
  int64_t ids = 0;
  int64_t duplicates = 0;
  CodeCounts errors;
  absl::Time last_ok = absl::InfinitePast();
  std::string last_error;  // the latest NextId error, with its time
};

// One thread's draws until a stop: `collections` names in turn (starting
// at its own), now and then a fresh one.
void Draw(const StressOptions& options, int index, int t, Client& client,
          IdLedger& ledger, ThreadStats& s) {
  const int collections = options.collections;
  const int64_t limit = options.ids_per_thread;
  const int64_t return_every = options.return_every;
  const int64_t new_every = options.new_collection_every;
  int64_t draws = 0;
  int64_t next_return = return_every;
  std::vector<std::string> names;
  for (int c = 0; c < collections; ++c) names.push_back(absl::StrCat("c", c));
  while (!stop_requested.load(std::memory_order_relaxed) &&
         (limit == 0 || s.ids < limit)) {
    for (int i = 0; i < collections; ++i) {
      ++draws;
      std::string fresh;
      if (new_every > 0 && draws % new_every == 0) {
        fresh = absl::StrCat("n", index, "-", t, "-", draws);
      }
      const std::string& name =
          fresh.empty() ? names[(t + i) % collections] : fresh;
      absl::StatusOr<Id> id = client.NextId(name);
      if (id.ok()) {
        if (!ledger.Add(name,
                        CounterOf(id->node_tag.view(), options.shared_store()),
                        id->number)) {
          ++s.duplicates;
        }
        ++s.ids;
        s.last_ok = absl::Now();
      } else {
        ++s.errors[static_cast<int>(id.status().code())];
        s.last_error = absl::StrCat(
            absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
            " ", id.status().ToString());
        // Keep a failing server from turning the load into a spin.
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    if (t == 0 && return_every > 0 && s.ids >= next_return) {
      client.ReturnUnusedRanges();
      next_return = s.ids + return_every;
    }
  }
}

}  // namespace

int RunWorker(const StressOptions& options, int index) {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  const std::string& dir = options.work_dir;
  RangeRecorder* recorder = RangeRecorder::Install();
  const int log_fd =
      open(WorkerLogPath(dir, index).c_str(),
           O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    absl::FPrintF(stderr, "hilo_stress worker %d: cannot write %s: %s\n", index,
                  WorkerLogPath(dir, index), strerror(errno));
    return 2;
  }
  recorder->SetLogFd(log_fd);

  std::atomic<int64_t> return_failures{0};
  ClientOptions client_options;
  client_options.targets = options.targets;
  client_options.rpc_deadline = options.rpc_deadline;
  client_options.log = [&](absl::string_view) { ++return_failures; };
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create(client_options);
  if (!client.ok()) {
    absl::FPrintF(stderr, "hilo_stress worker %d: %s\n", index,
                  client.status().ToString());
    return 2;
  }

  IdLedger ledger;
  std::vector<ThreadStats> stats(options.threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < options.threads; ++t) {
    pool.emplace_back(
        [&, t] { Draw(options, index, t, **client, ledger, stats[t]); });
  }
  for (std::thread& t : pool) t.join();
  client->reset();  // hands every unused tail back

  WorkerResult result;
  result.runs = ledger.Runs();
  const IdFindings outside = FindIdsOutsideRanges(
      result.runs,
      ByCounter(UsedRanges(recorder->Events()), options.shared_store()));
  result.outside = outside.numbers;
  result.examples = outside.problems;
  for (const ThreadStats& s : stats) {
    result.ids += s.ids;
    result.duplicates += s.duplicates;
    for (const auto& [code, n] : s.errors) result.errors[code] += n;
    result.last_ok = std::max(result.last_ok, s.last_ok);
    if (!s.last_error.empty()) result.last_error = s.last_error;
  }
  result.rpc_next = recorder->NextRangeCodes();
  result.rpc_return = recorder->ReturnRangeCodes();
  result.return_failures = return_failures.load();
  if (absl::Status s = WriteWorkerResult(WorkerResultPath(dir, index), result);
      !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress worker %d: %s\n", index, s.message());
    return 2;
  }
  close(log_fd);
  return 0;
}

}  // namespace hilo::stress
