// HiLoService: the hilo.v1.HiLo gRPC service.
//
// Validates each request, applies the range-size rule and the node-tag check,
// and leaves every durable decision to the RangeStore. The semantics are the
// ones documented in proto/hilo/v1/hilo.proto.
//
// Thread-safe: gRPC calls it from many threads at once.
#ifndef HILO_SERVICE_HILO_SERVICE_H_
#define HILO_SERVICE_HILO_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/clock.h"
#include "service/observer.h"
#include "service/range_size_policy.h"
#include "service/range_store.h"

namespace hilo {

class HiLoService final : public hilo::v1::HiLo::Service {
 public:
  // `store`, `clock` and `observer` (which may be null) must outlive the
  // service. `node_tag` must be valid.
  HiLoService(RangeStore* store, RangeSizePolicy policy, std::string node_tag,
              const Clock* clock, Observer* observer = nullptr);

  grpc::Status NextRange(grpc::ServerContext* context,
                         const hilo::v1::NextRangeRequest* request,
                         hilo::v1::NextRangeResponse* response) override;
  grpc::Status ReturnRange(grpc::ServerContext* context,
                           const hilo::v1::ReturnRangeRequest* request,
                           hilo::v1::ReturnRangeResponse* response) override;

  // The same operations without gRPC, returning the store's error codes.
  absl::Status DoNextRange(const hilo::v1::NextRangeRequest& request,
                           hilo::v1::NextRangeResponse* response);
  absl::Status DoReturnRange(const hilo::v1::ReturnRangeRequest& request,
                             hilo::v1::ReturnRangeResponse* response);

 private:
  RangeStore* const store_;
  const RangeSizePolicy policy_;
  const std::string node_tag_;
  const Clock* const clock_;
  Observer* const observer_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_HILO_SERVICE_H_
