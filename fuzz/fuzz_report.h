// What every part of the store fuzzer reports with: Fail, for a broken rule
// of the contract (libFuzzer then saves the input), and Trace, the one-line
// operation trace that fuzz/check_seed_traces.sh compares against
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

// Aborts with `what`, after flushing the trace so far.
[[noreturn]] inline void Fail(const std::string& what) {
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
