// AdminService: the hilo.v1.HiLoAdmin gRPC service, for operators.
//
// Reads a collection's row, lists rows a page at a time, and raises a floor
// (never lowers it). Same validation as HiLoService; an unknown collection is
// NOT_FOUND.
//
// Thread-safe.
#ifndef HILO_SERVICE_ADMIN_SERVICE_H_
#define HILO_SERVICE_ADMIN_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/range_store.h"

namespace hilo {

inline constexpr int kDefaultListPageSize = 100;
inline constexpr int kMaxListPageSize = 1000;

class AdminService final : public hilo::v1::HiLoAdmin::Service {
 public:
  // `store` must outlive the service.
  AdminService(RangeStore* store, std::string node_tag);

  grpc::Status GetCollection(
      grpc::ServerContext* context,
      const hilo::v1::GetCollectionRequest* request,
      hilo::v1::GetCollectionResponse* response) override;
  grpc::Status ListCollections(
      grpc::ServerContext* context,
      const hilo::v1::ListCollectionsRequest* request,
      hilo::v1::ListCollectionsResponse* response) override;
  grpc::Status SetFloor(grpc::ServerContext* context,
                        const hilo::v1::SetFloorRequest* request,
                        hilo::v1::SetFloorResponse* response) override;

  absl::Status DoGetCollection(const hilo::v1::GetCollectionRequest& request,
                               hilo::v1::GetCollectionResponse* response);
  absl::Status DoListCollections(
      const hilo::v1::ListCollectionsRequest& request,
      hilo::v1::ListCollectionsResponse* response);
  absl::Status DoSetFloor(const hilo::v1::SetFloorRequest& request,
                          hilo::v1::SetFloorResponse* response);

 private:
  RangeStore* const store_;
  const std::string node_tag_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_ADMIN_SERVICE_H_
