#include "bench/bench_options.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hilo::bench {

absl::StatusOr<std::vector<int>> ParseInFlight(absl::string_view list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", part,
                       "\" in --in_flight is not a positive "
                       "number"));
    }
    out.push_back(n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--in_flight is empty");
  return out;
}

BenchOptions SmokeOptions(BenchOptions options) {
  options.smoke = true;
  options.warmup = absl::Milliseconds(30);
  options.duration = absl::Milliseconds(100);
  options.repetitions = 1;
  options.latency_duration = absl::Milliseconds(300);
  options.memory_collections = 2000;
  options.client_memory_collections = 200;
  return options;
}

}  // namespace hilo::bench
