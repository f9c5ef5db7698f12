#include "client_cpp/src/fork_safe_source.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "client_cpp/src/fork_guard.h"

namespace hilo::internal {

ForkSafeSource::ForkSafeSource(std::unique_ptr<RangeSource> source)
    : source_(source.release()),
      description_(source_->Describe()),
      generation_(ForkGeneration()) {}

ForkSafeSource::~ForkSafeSource() {
  // A parent's source holds the parent's threads: joining them here would
  // never end. It is left as it is.
  if (!Forked()) delete source_;
}

bool ForkSafeSource::Forked() const { return ForkGeneration() != generation_; }

absl::Status ForkSafeSource::ForkedError() const {
  return absl::FailedPreconditionError(absl::StrFormat(
      "this hilo client (%s) was made before the process forked; gRPC "
      "cannot be used in a forked child, so the child makes its own client "
      "after forking (or execs). The child never hands out nor returns a "
      "range it inherited",
      description_));
}

absl::StatusOr<IssuedRange> ForkSafeSource::Next(
    absl::string_view collection, const PreviousRange& previous) {
  if (Forked()) return ForkedError();
  return source_->Next(collection, previous);
}

absl::StatusOr<ReturnResult> ForkSafeSource::Return(
    absl::string_view collection, const IssuedRange& range, int64_t last) {
  if (Forked()) return ForkedError();
  return source_->Return(collection, range, last);
}

std::vector<absl::StatusOr<ReturnResult>> ForkSafeSource::ReturnMany(
    absl::Span<const ReturnRequest> items) {
  if (Forked()) {
    return std::vector<absl::StatusOr<ReturnResult>>(items.size(),
                                                     ForkedError());
  }
  return source_->ReturnMany(items);
}

std::string ForkSafeSource::Describe() const { return description_; }

int64_t ForkSafeSource::failovers() const {
  return Forked() ? 0 : source_->failovers();
}

}  // namespace hilo::internal
