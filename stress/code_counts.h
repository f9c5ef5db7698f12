// Status codes as hilo_stress counts, names and prints them.
//
//   CodeCounts errors;
//   ++errors[static_cast<int>(absl::StatusCode::kUnavailable)];
//   FormatCodes(errors);  // "{UNAVAILABLE:1}"
//
// Codes are ints (absl::StatusCode and grpc::StatusCode share values), -1
// meaning none.
#ifndef HILO_STRESS_CODE_COUNTS_H_
#define HILO_STRESS_CODE_COUNTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hilo::stress {

// How often each status code was seen.
using CodeCounts = std::map<int, int64_t>;

// "UNAVAILABLE" for 14, "NONE" for a negative code.
std::string CodeName(int code);

// The code of a name CodeName gives (0 to 16); INVALID_ARGUMENT for any
// other text.
absl::StatusOr<int> CodeOf(absl::string_view name);

// "{OK:3,UNAVAILABLE:1}", codes in order.
std::string FormatCodes(const CodeCounts& counts);

}  // namespace hilo::stress

#endif  // HILO_STRESS_CODE_COUNTS_H_
