#include "service/observe/exhaustion_reporter.h"

#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/access/line_writer.h"

namespace hilo {
namespace {

// Collections remembered as reported; past this every crossing is logged
// again (the limiter still caps the lines).
constexpr size_t kMaxRemembered = 10000;

}  // namespace

ExhaustionReporter::ExhaustionReporter(
    double share, const Clock* clock,
    std::function<void(const std::string&)> log)
    : share_(share),
      // 2^63 (INT64_MAX as a double) does not fit back into an int64.
      threshold_(share >= 1
                     ? std::numeric_limits<int64_t>::max()
                     : static_cast<int64_t>(
                           share * static_cast<double>(
                                       std::numeric_limits<int64_t>::max()))),
      log_(std::move(log)),
      limiter_(/*lines_per_second=*/5, /*max_line_bytes=*/512, clock) {}

void ExhaustionReporter::OnNextRange(absl::string_view collection,
                                     const absl::Status& status,
                                     const Range* range, absl::Duration) {
  if (range != nullptr) Saw(collection, range->high);
}

void ExhaustionReporter::OnSetFloor(absl::string_view collection,
                                    const absl::Status& status,
                                    const FloorOutcome* outcome) {
  if (outcome != nullptr) Saw(collection, outcome->max);
}

void ExhaustionReporter::Saw(absl::string_view collection, int64_t max) {
  if (max < threshold_) return;
  {
    base::MutexLock lock(&mu_);
    if (reported_.contains(collection)) return;
    if (reported_.size() < kMaxRemembered) {
      reported_.emplace(collection);
    }
  }
  std::optional<std::string> line = limiter_.Admit(absl::StrFormat(
      "collection \"%s\" is near exhaustion: Max %d has passed %g of "
      "INT64_MAX (%d numbers left); find what pushed it (the audit log "
      "shows SetFloor calls and refused last_max values)",
      collection, max, share_, std::numeric_limits<int64_t>::max() - max));
  if (!line.has_value()) return;
  if (log_ != nullptr) {
    log_(*line);
  } else {
    StderrLines().Write(absl::StrCat("hilo_server: ", *line));
  }
}

}  // namespace hilo
