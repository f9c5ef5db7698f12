// client_benchmark: Google Benchmark of the client's fast path beside the
// baselines it is judged against, on 1 and 2 threads:
//
//   BM_AtomicFetchAdd      a bare std::atomic<int64_t>::fetch_add, shared by
//                          the threads (NextId's floor)
//   BM_NextId              hilo::Client::NextId on one collection
//   BM_HandleNextId        the same through a hilo::CollectionHandle
//   BM_StrCatDocumentId    the same document-ID string ("orders/12345678-A")
//                          built with absl::StrCat from a thread-local number
//                          (NextDocumentId's floor)
//   BM_NextDocumentId      hilo::Client::NextDocumentId
//   BM_HandleNextDocumentId  the same through a hilo::CollectionHandle
//   BM_UuidV4String        a random UUID v4 string from libuuid
//                          (uuid_generate_random + uuid_unparse_lower), the
//                          usual alternative to HiLo
//
// The client talks to an in-process hilo::Server on 127.0.0.1:0 (defaults:
// sync=full, max_batch=256) whose database lives in a scratch directory under
// $TMPDIR or /tmp. Before the benchmarks run, 4 Mi IDs are drawn so ranges
// have grown to the server's largest size; refills that happen during a
// benchmark (an RPC and a durable commit) are part of its time.
//
// After Google Benchmark's own console output, prints a Markdown table of the
// results and the ratios against the targets (NextId within 1.5x of the
// atomic, NextDocumentId within 1.5x of StrCat and at least 5x faster than
// the UUID). Own flags: --smoke (a seconds-long run for the test suite) and
// --out_md=FILE (also write the Markdown there); the rest go to Google
// Benchmark (e.g. --benchmark_repetitions=3).
#include <stdlib.h>
#include <uuid/uuid.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "grpc/support/log.h"
#include "hilo/client.h"
#include "service/server.h"

namespace hilo::bench {
namespace {

constexpr absl::string_view kCollection = "orders";

// Set up by main before any benchmark runs; read-only afterwards.
hilo::Client* g_client = nullptr;
std::string g_node_tag;

void BM_AtomicFetchAdd(benchmark::State& state) {
  static std::atomic<int64_t> counter{0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(counter.fetch_add(1));
  }
  state.SetItemsProcessed(state.iterations());
}

// Times `next()` (an ID source returning absl::StatusOr) per iteration.
template <typename Next>
void DrawIds(benchmark::State& state, Next next) {
  for (auto _ : state) {
    auto id = next();
    if (!id.ok()) {
      state.SkipWithError(id.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_NextId(benchmark::State& state) {
  DrawIds(state, [] { return g_client->NextId(kCollection); });
}

// The same through a CollectionHandle: no lookup of the name per call.
void BM_HandleNextId(benchmark::State& state) {
  const hilo::CollectionHandle handle = g_client->Collection(kCollection);
  DrawIds(state, [&] { return handle.NextId(); });
}

void BM_StrCatDocumentId(benchmark::State& state) {
  // Numbers of the size NextDocumentId hands out here (8 digits).
  int64_t number = 10000000 + state.thread_index() * 1000000000LL;
  const char separator = '/';
  for (auto _ : state) {
    std::string id = absl::StrCat(kCollection, absl::string_view(&separator, 1),
                                  number++, "-", g_node_tag);
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_NextDocumentId(benchmark::State& state) {
  DrawIds(state, [] { return g_client->NextDocumentId(kCollection); });
}

void BM_HandleNextDocumentId(benchmark::State& state) {
  const hilo::CollectionHandle handle = g_client->Collection(kCollection);
  DrawIds(state, [&] { return handle.NextDocumentId(); });
}

void BM_UuidV4String(benchmark::State& state) {
  for (auto _ : state) {
    uuid_t uuid;
    uuid_generate_random(uuid);
    char text[37];
    uuid_unparse_lower(uuid, text);
    std::string id(text, 36);
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_AtomicFetchAdd)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_NextId)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_HandleNextId)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_StrCatDocumentId)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_NextDocumentId)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_HandleNextDocumentId)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_UuidV4String)->Threads(1)->Threads(2)->UseRealTime();

// Google Benchmark's console output, plus each result's calls per second
// (all threads together) kept for the Markdown summary: the median
// aggregate when repetitions ran, else the single run.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) {
        errors_.push_back(run.benchmark_name() + ": " + run.error_message);
        continue;
      }
      const bool median =
          run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      auto it = run.counters.find("items_per_second");
      if (it == run.counters.end()) continue;
      Result& result =
          results_[{run.run_name.function_name, static_cast<int>(run.threads)}];
      if (median || !result.from_median) {
        if (!median) result.runs.push_back(it->second.value);
        result.per_second = median ? it->second.value : MedianOf(result.runs);
        result.from_median = median;
      }
    }
  }

  // Calls per second of `name` on `threads` threads, 0 if it did not run.
  double PerSecond(const std::string& name, int threads) const {
    auto it = results_.find({name, threads});
    return it == results_.end() ? 0 : it->second.per_second;
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  struct Result {
    std::vector<double> runs;
    double per_second = 0;
    bool from_median = false;
  };
  static double MedianOf(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
  std::map<std::pair<std::string, int>, Result> results_;
  std::vector<std::string> errors_;
};

std::string Markdown(const SummaryReporter& r, const std::string& prefetch,
                     bool smoke) {
  struct Row {
    const char* name;
    const char* label;
  };
  const Row rows[] = {
      {"BM_AtomicFetchAdd", "bare `std::atomic<int64_t>::fetch_add`"},
      {"BM_NextId", "`Client::NextId`"},
      {"BM_HandleNextId", "`CollectionHandle::NextId`"},
      {"BM_StrCatDocumentId", "document ID with `absl::StrCat`"},
      {"BM_NextDocumentId", "`Client::NextDocumentId`"},
      {"BM_HandleNextDocumentId", "`CollectionHandle::NextDocumentId`"},
      {"BM_UuidV4String", "UUID v4 string (libuuid)"},
  };
  std::string md;
  if (smoke) {
    md += "_Smoke run: these numbers only show that the benchmark works._\n\n";
  }
  absl::StrAppendFormat(
      &md,
      "### Client fast path (Google Benchmark)\n\n"
      "Real time per call; with 2 threads both call at once on one shared "
      "object (the same atomic, the same client and collection), so per "
      "thread is the latency each caller sees and total is the throughput. "
      "Client: %s.\n\n"
      "| operation | 1 thread: ns/call | 2 threads: ns/call per thread | "
      "1 thread: M calls/s | 2 threads: M calls/s total |\n"
      "|---|---:|---:|---:|---:|\n",
      prefetch);
  for (const Row& row : rows) {
    const double one = r.PerSecond(row.name, 1);
    const double two = r.PerSecond(row.name, 2);
    absl::StrAppendFormat(&md, "| %s | %.1f | %.1f | %.1f | %.1f |\n",
                          row.label, one > 0 ? 1e9 / one : 0,
                          two > 0 ? 2e9 / two : 0, one / 1e6, two / 1e6);
  }
  md +=
      "\n### Client targets\n\n"
      "| ratio (time per call) | threads | measured | target | met |\n"
      "|---|---:|---:|---:|:---:|\n";
  // One row: time(a) / time(b) on `threads` threads against `target`
  // (at most `target` if `at_most`, else at least).
  auto ratio_row = [&](const char* label, const char* a, const char* b,
                       int threads, double target, bool at_most) {
    const double pa = r.PerSecond(a, threads), pb = r.PerSecond(b, threads);
    if (pa <= 0 || pb <= 0) {
      absl::StrAppendFormat(&md, "| %s | %d | | %s %.2f | not run |\n", label,
                            threads, at_most ? "≤" : "≥", target);
      return;
    }
    const double ratio = pb / pa;
    const bool met = at_most ? ratio <= target : ratio >= target;
    absl::StrAppendFormat(&md, "| %s | %d | %.2f | %s %.2f | %s |\n", label,
                          threads, ratio, at_most ? "≤" : "≥", target,
                          met ? "yes" : "**no**");
  };
  for (int threads : {1, 2}) {
    ratio_row("`NextId` ÷ bare atomic", "BM_NextId", "BM_AtomicFetchAdd",
              threads, 1.5, true);
  }
  for (int threads : {1, 2}) {
    ratio_row("handle `NextId` ÷ bare atomic", "BM_HandleNextId",
              "BM_AtomicFetchAdd", threads, 1.5, true);
  }
  for (int threads : {1, 2}) {
    ratio_row("`NextDocumentId` ÷ StrCat document ID", "BM_NextDocumentId",
              "BM_StrCatDocumentId", threads, 1.5, true);
  }
  for (int threads : {1, 2}) {
    ratio_row("handle `NextDocumentId` ÷ StrCat document ID",
              "BM_HandleNextDocumentId", "BM_StrCatDocumentId", threads, 1.5,
              true);
  }
  for (int threads : {1, 2}) {
    ratio_row("UUID v4 string ÷ `NextDocumentId` (speed-up)", "BM_UuidV4String",
              "BM_NextDocumentId", threads, 5, false);
  }
  return md;
}

int Main(int argc, char** argv) {
  bool smoke = false;
  std::string out_md;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--smoke") {
      smoke = true;
    } else if (absl::StartsWith(arg, "--out_md=")) {
      out_md = std::string(arg.substr(strlen("--out_md=")));
    } else {
      args.push_back(argv[i]);
    }
  }
  static char kSmokeMinTime[] = "--benchmark_min_time=0.02";
  static char kSmokeRepetitions[] = "--benchmark_repetitions=1";
  if (smoke) {
    args.push_back(kSmokeMinTime);
    args.push_back(kSmokeRepetitions);
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);

  const char* tmp = getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "/client_benchmark.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "client_benchmark: cannot create %s\n", dir.c_str());
    return 1;
  }
  // Removes the scratch directory however this function returns.
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  int exit_code = 0;
  {
    hilo::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.db_path = dir + "/hilo.db";
    absl::StatusOr<std::unique_ptr<hilo::Server>> server =
        hilo::Server::Start(server_options);
    if (!server.ok()) {
      std::fprintf(stderr, "client_benchmark: %s\n",
                   server.status().ToString().c_str());
      return 1;
    }
    hilo::ClientOptions options;
    options.targets = {absl::StrCat("127.0.0.1:", (*server)->port())};
    const std::string prefetch = absl::StrFormat(
        "`ClientOptions` defaults (prefetch_at = %g)", options.prefetch_at);
    absl::StatusOr<std::unique_ptr<hilo::Client>> client =
        hilo::Client::Create(options);
    if (!client.ok()) {
      std::fprintf(stderr, "client_benchmark: %s\n",
                   client.status().ToString().c_str());
      return 1;
    }
    g_client = client->get();
    // Grow the range to its largest size before measuring.
    for (int i = 0; i < (smoke ? 1 << 16 : 1 << 22); ++i) {
      absl::StatusOr<hilo::Id> id = g_client->NextId(kCollection);
      if (!id.ok()) {
        std::fprintf(stderr, "client_benchmark: NextId: %s\n",
                     id.status().ToString().c_str());
        return 1;
      }
      g_node_tag = std::string(id->node_tag);
    }

    SummaryReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    const std::string md = Markdown(reporter, prefetch, smoke);
    std::printf("\n%s", md.c_str());
    std::fflush(stdout);
    if (!out_md.empty()) {
      std::ofstream out(out_md);
      out << md;
      if (!out) {
        std::fprintf(stderr, "client_benchmark: cannot write %s\n",
                     out_md.c_str());
        exit_code = 1;
      }
    }
    for (const std::string& error : reporter.errors()) {
      std::fprintf(stderr, "client_benchmark: %s\n", error.c_str());
      exit_code = 1;
    }
    g_client = nullptr;
    client->reset();
    (*server)->Shutdown(absl::Seconds(1));
  }
  benchmark::Shutdown();
  return exit_code;
}

}  // namespace
}  // namespace hilo::bench

int main(int argc, char** argv) { return hilo::bench::Main(argc, argv); }
