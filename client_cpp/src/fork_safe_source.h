// ForkSafeSource: a RangeSource that a forked child builds anew.
//
// A gRPC channel, and the threads a GrpcRangeSource keeps, belong to the
// process that made them: a child of fork() can neither use nor destroy
// them. ForkSafeSource builds its source with `make`; in a process forked
// after that (ForkGeneration() moved on) the first call builds a new one and
// leaves the old one to the parent, never touched again (its memory is the
// child's small price for a fork). In the process that built it, a call
// costs one relaxed load and a compare more than the source's own.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_
#define HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "client_cpp/src/fork_guard.h"
#include "client_cpp/src/range_source.h"
#include "hilo/base/mutex.h"

namespace hilo::internal {

class ForkSafeSource final : public RangeSource, public ForkAware {
 public:
  using Factory = std::function<std::unique_ptr<RangeSource>()>;
  // Calls `make` now, and again in a forked child when first needed.
  explicit ForkSafeSource(Factory make);
  // Destroys the source built in this process (not one of a parent's).
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

  void BeforeFork() override;
  void AfterForkInParent() override;
  void AfterForkInChild() override;

 private:
  // The source of this process, built here if a parent built the current.
  RangeSource* Current() const;

  const Factory make_;
  // Serialises rebuilding; taken around fork so no child inherits it held.
  mutable base::Mutex mu_;
  // Stored before generation_ (release), read after it (acquire).
  mutable std::atomic<RangeSource*> current_{nullptr};
  mutable std::atomic<uint64_t> generation_{0};
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_FORK_SAFE_SOURCE_H_
