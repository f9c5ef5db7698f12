// hilo_bench: the load tool. Measures, in one run, on this machine:
//
//   1. Server throughput: NextRange at 1, 16, 64 and 256 requests in flight
//      over loopback (gRPC callback API, closed loops), on 1 and on 100
//      collections, against a hilo_server child process with its default
//      settings (sync=full, max_batch=256, metrics on). Beside it, with the
//      same load generator: a no-op RPC on the same server
//      (grpc.health.v1.Health/Check, the gRPC ceiling), NextRange on a server
//      started with --max_batch=1 (no group commit), and single-row durable
//      SQLite commits in the same directory as the server's database (WAL,
//      synchronous=FULL, one transaction per row: the flush ceiling).
//   2. Client latency: hilo::Client behind an in-process proxy that adds a
//      fixed delay (2 ms) to every HiLo RPC, IDs drawn flat out on 2 threads;
//      how many calls waited, and p50 / p99 / p99.9 call latency, with
//      prefetch off and on.
//   3. Memory: the server's resident set with 100,000 collections, and the
//      client's heap per cached collection.
//
// Prints Markdown tables (ready for BENCHMARKS.md) on stdout and progress on
// stderr; --out_md and --out_data also write the tables and the throughput
// series (for bench/plot_throughput.gp) to files. Every server binds
// 127.0.0.1:0; every phase is bounded in time or count. Exits non-zero if
// any RPC failed or a server misbehaved. --smoke shrinks everything to a few
// seconds for the test suite.
//
// This file is the shell: flags, read once into BenchOptions, and the
// output files. The sections are sections.h (throughput_section.cc,
// latency_section.cc, memory_section.cc); the load generator ClosedLoop
// (closed_loop.h) with its calls (rpc_calls.h); the servers' lifecycle
// BenchRun (bench_run.h, on hilo::testing's ServerProcess).
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/bench_options.h"
#include "bench/bench_run.h"
#include "bench/sections.h"
#include "grpc/support/log.h"

#ifndef HILO_SERVER_PATH
#define HILO_SERVER_PATH "hilo_server"
#endif

ABSL_FLAG(std::string, server, HILO_SERVER_PATH, "the hilo_server binary");
ABSL_FLAG(std::string, data_dir, "",
          "parent of the scratch directory holding every database (servers' "
          "and the flush ceiling's); default $TMPDIR or /tmp. It decides "
          "which disk is measured");
ABSL_FLAG(bool, keep_data, false, "keep the scratch directory");
ABSL_FLAG(std::string, server_flags, "",
          "extra flags for every hilo_server started, space-separated (for "
          "experiments, e.g. \"--sync=normal\"; the published numbers use "
          "none)");
ABSL_FLAG(std::string, in_flight, "1,16,64,256",
          "requests in flight for the throughput runs");
ABSL_FLAG(int, many_collections, 100,
          "collections of the multi-collection NextRange series");
ABSL_FLAG(int, channels, 2,
          "gRPC channels (TCP connections) the load generator spreads its "
          "requests over");
ABSL_FLAG(absl::Duration, warmup, absl::Milliseconds(300),
          "unmeasured load before each throughput measurement");
ABSL_FLAG(absl::Duration, duration, absl::Milliseconds(1500),
          "measured time of each throughput point");
ABSL_FLAG(int, repetitions, 3,
          "runs of every throughput point (interleaved); tables show the "
          "median");
ABSL_FLAG(absl::Duration, added_latency, absl::Milliseconds(2),
          "delay the proxy adds to each HiLo RPC in the client latency runs");
ABSL_FLAG(absl::Duration, latency_duration, absl::Seconds(3),
          "length of each client latency run");
ABSL_FLAG(int, latency_threads, 2, "threads drawing IDs in the latency runs");
ABSL_FLAG(double, prefetch_at, 0.2,
          "ClientOptions::prefetch_at of the latency run with prefetch on");
ABSL_FLAG(int, memory_collections, 100000,
          "collections created on a fresh server for its memory figure");
ABSL_FLAG(int, client_memory_collections, 10000,
          "collections cached by one client for its memory figure");
ABSL_FLAG(std::string, sections, "throughput,latency,memory",
          "which parts to run");
ABSL_FLAG(std::string, out_md, "", "also write the Markdown tables here");
ABSL_FLAG(std::string, out_data, "",
          "write the throughput series here (TSV, for the plot)");
ABSL_FLAG(bool, smoke, false,
          "a seconds-long run that only checks everything works; its numbers "
          "mean nothing");

namespace hilo::bench {
namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    absl::FPrintF(stderr, "hilo_bench: cannot write %s\n", path);
    return false;
  }
  return true;
}
int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures hilo's server throughput against the gRPC and flush "
      "ceilings, client latency with added server latency, and memory.\n"
      "Usage: hilo_bench [--smoke] [--out_md=FILE] [--out_data=FILE] ...");
  absl::ParseCommandLine(argc, argv);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);

  BenchOptions s;
  s.server = absl::GetFlag(FLAGS_server);
  s.server_flags =
      absl::StrSplit(absl::GetFlag(FLAGS_server_flags), ' ', absl::SkipEmpty());
  absl::StatusOr<std::vector<int>> in_flight =
      ParseInFlight(absl::GetFlag(FLAGS_in_flight));
  if (!in_flight.ok()) {
    absl::FPrintF(stderr, "hilo_bench: %s\n", in_flight.status().message());
    return 2;
  }
  s.in_flight = *in_flight;
  s.many_collections = std::max(1, absl::GetFlag(FLAGS_many_collections));
  s.channels = std::max(1, absl::GetFlag(FLAGS_channels));
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.duration = absl::GetFlag(FLAGS_duration);
  s.repetitions = std::max(1, absl::GetFlag(FLAGS_repetitions));
  s.added_latency = absl::GetFlag(FLAGS_added_latency);
  s.latency_duration = absl::GetFlag(FLAGS_latency_duration);
  s.latency_threads = std::max(1, absl::GetFlag(FLAGS_latency_threads));
  s.prefetch_at = absl::GetFlag(FLAGS_prefetch_at);
  s.memory_collections = std::max(0, absl::GetFlag(FLAGS_memory_collections));
  s.client_memory_collections =
      std::max(0, absl::GetFlag(FLAGS_client_memory_collections));
  if (absl::GetFlag(FLAGS_smoke)) s = SmokeOptions(std::move(s));
  const std::string sections = absl::GetFlag(FLAGS_sections);
  auto wanted = [&](absl::string_view name) {
    for (absl::string_view part : absl::StrSplit(sections, ',')) {
      if (part == name) return true;
    }
    return false;
  };

  std::string parent = absl::GetFlag(FLAGS_data_dir);
  if (parent.empty()) {
    const char* tmp = getenv("TMPDIR");
    parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string dir_template = parent + "/hilo_bench.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    absl::FPrintF(stderr, "hilo_bench: cannot create a directory in %s\n",
                  parent);
    return 1;
  }
  const std::string dir = dir_template;

  BenchRun bench(s, dir);
  absl::Status status;
  if (status.ok() && wanted("throughput")) status = RunThroughput(bench);
  if (status.ok() && wanted("latency")) status = RunLatency(bench);
  if (status.ok() && wanted("memory")) status = RunMemory(bench);

  if (!absl::GetFlag(FLAGS_keep_data)) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string md = bench.markdown();
  if (s.smoke) {
    md = "_Smoke run: these numbers only show that the benchmark works._\n\n" +
         md;
  }
  std::fputs(md.c_str(), stdout);
  std::fflush(stdout);
  bool wrote = true;
  if (const std::string out = absl::GetFlag(FLAGS_out_md); !out.empty()) {
    wrote = WriteFile(out, md) && wrote;
  }
  if (const std::string out = absl::GetFlag(FLAGS_out_data); !out.empty()) {
    wrote = WriteFile(out, bench.data()) && wrote;
  }
  if (!status.ok()) {
    absl::FPrintF(stderr, "hilo_bench: %s\n", status.ToString());
    return 1;
  }
  if (bench.failures() > 0) {
    absl::FPrintF(stderr, "hilo_bench: %d calls failed\n", bench.failures());
    return 1;
  }
  return wrote ? 0 : 1;
}

}  // namespace
}  // namespace hilo::bench

int main(int argc, char** argv) { return hilo::bench::Main(argc, argv); }
