// hilo_draw: N threads take document IDs from one collection for S seconds
// and print each on its own line, then the client hands its unused numbers
// back and the program exits 0. The C++ branch of scripts/hilo-draw:
//
//   hilo_draw [--targets=HOST:PORT,...] --collection=NAME --threads=N
//             --seconds=S [--rate=R] [--stats [--mark_after=M]]
//
// It keeps drawing through UNAVAILABLE (every target down for a moment)
// until S is over. --rate paces each thread to R IDs a second; --stats
// ends with one line on stderr, `hilo_draw: ids=N longest_wait_ms=W
// calls_waited=C runway_s=R`: W is the longest an ID took to come (a failed
// try and the wait before the next one included), C the client's
// calls_waited (the first call always waits: a new client holds no range),
// R the collection's runway when the drawing ended (-1: none). With
// --mark_after, the line goes on with ` mark_calls_waited=C0
// mark_runway_s=R0 after_mark_longest_wait_ms=W1`: calls_waited and the
// runway M seconds into the drawing, and the longest wait since (a test
// marks just before it breaks something, so that C - C0 and W1 are what
// the break cost, without the waits of the client's first ranges). Any other
// error prints one line naming it to stderr and exits 1. Lines go to stdout
// through one buffer, so a reader that reads slowly slows the drawing down
// (nothing is dropped).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/client.h"

ABSL_FLAG(std::vector<std::string>, targets, {"127.0.0.1:50051"},
          "hilo servers, in failover order");
ABSL_FLAG(std::string, collection, "", "collection to draw from");
ABSL_FLAG(int, threads, 1, "threads drawing at once");
ABSL_FLAG(double, seconds, 1, "how long to draw");
ABSL_FLAG(double, rate, 0, "IDs a second per thread; 0: as fast as it can");
ABSL_FLAG(bool, stats, false,
          "end with the count of IDs and the longest wait on stderr");
ABSL_FLAG(double, mark_after, -1,
          "with --stats: also report the waits after this many seconds of "
          "drawing, and calls_waited and the runway at that moment");

namespace {

// What the drawing threads share.
struct Drawing {
  hilo::CollectionHandle* handle;
  std::chrono::steady_clock::time_point until;
  std::chrono::steady_clock::duration pace;
  std::mutex out_mu;
  std::mutex error_mu;
  std::string error;  // the first error that is not UNAVAILABLE
  std::atomic<bool> failed{false};
  std::atomic<int64_t> ids{0};
  std::atomic<int64_t> longest_wait_ns{0};
};

// One thread's drawing: IDs to stdout, paced, until the time is up or a
// thread meets an error other than UNAVAILABLE (which it keeps in d->error).
void Draw(Drawing* d) {
  std::string id;
  auto next = std::chrono::steady_clock::now();
  auto asked = next;  // when the ID being drawn was first asked for
  while (!d->failed.load(std::memory_order_relaxed) &&
         std::chrono::steady_clock::now() < d->until) {
    id.clear();
    const absl::Status status = d->handle->AppendDocumentId(&id);
    const auto now = std::chrono::steady_clock::now();
    if (status.ok()) {
      const int64_t waited =
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - asked)
              .count();
      int64_t longest = d->longest_wait_ns.load(std::memory_order_relaxed);
      while (waited > longest &&
             !d->longest_wait_ns.compare_exchange_weak(longest, waited)) {
      }
      d->ids.fetch_add(1, std::memory_order_relaxed);
      if (d->pace > std::chrono::steady_clock::duration::zero()) {
        next = std::max(next + d->pace, now);
        std::this_thread::sleep_until(next);
      }
      asked = std::chrono::steady_clock::now();
    }
    if (status.code() == absl::StatusCode::kUnavailable) {
      // A node is down; the client moves on or recovers by itself.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(d->error_mu);
      if (d->error.empty()) d->error = status.ToString();
      d->failed.store(true);
      return;
    }
    id.push_back('\n');
    std::lock_guard<std::mutex> lock(d->out_mu);
    std::fwrite(id.data(), 1, id.size(), stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string collection = absl::GetFlag(FLAGS_collection);
  const int threads = absl::GetFlag(FLAGS_threads);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const double rate = absl::GetFlag(FLAGS_rate);
  if (collection.empty() || threads < 1 || !(seconds >= 0) || !(rate >= 0)) {
    std::fprintf(stderr,
                 "hilo_draw: needs --collection=NAME, --threads >= 1, "
                 "--seconds >= 0 and --rate >= 0\n");
    return 2;
  }
  const auto pace =
      rate > 0
          ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(1 / rate))
          : std::chrono::steady_clock::duration::zero();
  hilo::ClientOptions options;
  options.targets = absl::GetFlag(FLAGS_targets);
  absl::StatusOr<std::unique_ptr<hilo::Client>> client =
      hilo::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "hilo_draw: %s\n", client.status().ToString().c_str());
    return 1;
  }
  hilo::CollectionHandle handle = (*client)->Collection(collection);
  Drawing drawing;
  drawing.handle = &handle;
  drawing.until = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::duration<double>(seconds));
  drawing.pace = pace;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(Draw, &drawing);
  }
  const double mark_after = absl::GetFlag(FLAGS_mark_after);
  hilo::ClientStats at_mark;
  int64_t longest_before_mark_ns = -1;
  if (mark_after >= 0 && mark_after < seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(mark_after));
    at_mark = (*client)->stats();
    longest_before_mark_ns = drawing.longest_wait_ns.exchange(0);
  }
  for (std::thread& w : workers) w.join();
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "hilo_draw: writing the IDs to stdout failed\n");
    return 1;
  }
  if (drawing.failed.load()) {
    std::fprintf(stderr, "hilo_draw: drawing from \"%s\" failed: %s\n",
                 collection.c_str(), drawing.error.c_str());
    return 1;
  }
  const hilo::ClientStats stats = (*client)->stats();
  (*client)->ReturnUnusedRanges();
  if (absl::GetFlag(FLAGS_stats)) {
    const auto runway_of = [&](const hilo::ClientStats& s) {
      const auto it = s.runway.find(collection);
      return it == s.runway.end() ? -1.0 : absl::ToDoubleSeconds(it->second);
    };
    const int64_t after_mark_ns = drawing.longest_wait_ns.load();
    std::string mark;
    if (longest_before_mark_ns >= 0) {
      mark = absl::StrFormat(
          " mark_calls_waited=%d mark_runway_s=%.1f "
          "after_mark_longest_wait_ms=%.1f",
          at_mark.calls_waited, runway_of(at_mark), after_mark_ns / 1e6);
    }
    std::fprintf(stderr,
                 "hilo_draw: ids=%lld longest_wait_ms=%.1f calls_waited=%lld "
                 "runway_s=%.1f%s\n",
                 static_cast<long long>(drawing.ids.load()),
                 std::max(longest_before_mark_ns, after_mark_ns) / 1e6,
                 static_cast<long long>(stats.calls_waited), runway_of(stats),
                 mark.c_str());
  }
  return 0;
}
