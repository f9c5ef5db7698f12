// What every part of the store fuzzer reports with: Fail, for a broken rule
// of the contract (libFuzzer then saves the input; inside a Trial, the
// driver tries another order of concurrent calls first), and Trace, the
// one-line operation trace that fuzz/check_seed_traces.sh compares against
// fuzz/seed_traces/ (on only in builds with HILO_FUZZ_TRACE).
#ifndef HILO_FUZZ_FUZZ_REPORT_H_
#define HILO_FUZZ_FUZZ_REPORT_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace hilo::fuzz {

#ifdef HILO_FUZZ_TRACE
inline constexpr bool kTrace = true;
#else
inline constexpr bool kTrace = false;
#endif

// What Fail throws inside a Trial.
struct ContractBroken {
  std::string what;
};

// Trials open now (one thread drives the fuzzer).
inline int& OpenTrials() {
  static int open = 0;
  return open;
}

// While a Trial lives, Fail throws ContractBroken instead of aborting: the
// driver judges calls that ran concurrently in one order they could have
// run in, and tries the next order when the model refuses that one.
class Trial {
 public:
  Trial() { ++OpenTrials(); }
  ~Trial() { --OpenTrials(); }
  Trial(const Trial&) = delete;
  Trial& operator=(const Trial&) = delete;
};

// Aborts with `what`, after flushing the trace so far (throws inside a
// Trial).
[[noreturn]] inline void Fail(const std::string& what) {
  if (OpenTrials() > 0) throw ContractBroken{what};
  std::fflush(stdout);
  std::fprintf(stderr, "range_store_fuzzer: CONTRACT BROKEN: %s\n",
               what.c_str());
  std::abort();
}

// One line of the operation trace, its bytes outside printable ASCII
// escaped; builds nothing unless tracing.
template <typename... Parts>
void Trace(const Parts&... parts) {
  if constexpr (kTrace) {
    std::printf("%s\n", absl::CHexEscape(absl::StrCat(parts...)).c_str());
  }
}

}  // namespace hilo::fuzz

#endif  // HILO_FUZZ_FUZZ_REPORT_H_
