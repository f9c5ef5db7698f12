// ForkSafeSource: a RangeSource that a forked child does not use.
//
// gRPC's C++ core (1.51) does not survive fork(): a child of a process that
// used it has none of its threads, so a call made there can wait past its
// deadline for ever, and gRPC's own fork support stops the parent's calls.
// So in a process forked after this source was made (ForkGeneration()
// moved on), every call fails at once with FAILED_PRECONDITION, saying why
// and what to do instead (make the client after forking, or exec); the
// source, its channels and its threads are left to the parent, never used
// nor destroyed here. In the process that made it, a call costs one relaxed
// load and a compare more than the source's own.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_
#define HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client_cpp/src/range_source.h"

namespace hilo::internal {

class ForkSafeSource final : public RangeSource {
 public:
  explicit ForkSafeSource(std::unique_ptr<RangeSource> source);
  // Destroys the source if this process made it (not in a forked child).
  ~ForkSafeSource() override;

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override;
  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override;
  std::vector<absl::StatusOr<ReturnResult>> ReturnMany(
      absl::Span<const ReturnRequest> items) override;
  std::string Describe() const override;
  int64_t failovers() const override;

 private:
  // Whether this process is the one that made the source.
  bool Forked() const;
  absl::Status ForkedError() const;

  RangeSource* const source_;  // owned unless Forked()
  const std::string description_;
  const uint64_t generation_;
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_
