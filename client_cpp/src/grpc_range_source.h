// GrpcRangeSource: a RangeSource over one or more hilo servers.
//
// The only place in the client where a grpc::Status becomes an absl::Status.
// Next tries the preferred target first and, on UNAVAILABLE or
// DEADLINE_EXCEEDED, each other target once; the target that answers becomes
// the preferred one. Return goes to the target that issued the range.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_
#define HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "client_cpp/src/range_source.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo::internal {

class GrpcRangeSource final : public RangeSource {
 public:
  struct Target {
    std::string name;
    std::unique_ptr<hilo::v1::HiLo::StubInterface> stub;
  };

  // `targets` must not be empty.
  GrpcRangeSource(std::vector<Target> targets, absl::Duration rpc_deadline);

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override;
  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override;
  std::string Describe() const override;

 private:
  std::vector<Target> targets_;
  const absl::Duration rpc_deadline_;
  std::atomic<size_t> preferred_{0};
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_GRPC_RANGE_SOURCE_H_
