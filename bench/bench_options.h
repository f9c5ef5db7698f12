// BenchOptions: what a hilo_bench run measures and how long, read from its
// flags once (hilo_bench.cc). The flags' help says what each field is.
#ifndef HILO_BENCH_BENCH_OPTIONS_H_
#define HILO_BENCH_BENCH_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hilo::bench {

struct BenchOptions {
  std::string server;  // the hilo_server binary
  std::vector<std::string> server_flags;
  std::vector<int> in_flight;
  int many_collections = 100;
  int channels = 2;
  absl::Duration warmup, duration;
  int repetitions = 3;
  absl::Duration added_latency, latency_duration;
  int latency_threads = 2;
  double prefetch_at = 0.2;
  int memory_collections = 100000, client_memory_collections = 10000;
  bool smoke = false;
};

// The numbers of a comma-separated list such as --in_flight's, each at
// least 1. INVALID_ARGUMENT, naming the part, otherwise or if it is empty.
absl::StatusOr<std::vector<int>> ParseInFlight(absl::string_view list);

// `options` shrunk to a seconds-long run (--smoke): every phase short,
// one repetition, few collections.
BenchOptions SmokeOptions(BenchOptions options);

}  // namespace hilo::bench

#endif  // HILO_BENCH_BENCH_OPTIONS_H_
