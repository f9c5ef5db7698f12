// The gRPC faces of HiLoService and AdminService, on gRPC's callback API.
//
// Each handler takes the call's default reactor, hands the request to the
// service and returns; the service's completion, which runs once the
// store's commit is durable, finishes the call. No thread waits for a
// commit, however many calls are in flight. This is the one place where the
// server turns an absl::Status into a grpc::Status (with ToGrpcStatus of
// hilo/v1/conversions.h).
//
// Thread-safe.
#ifndef HILO_SERVICE_GRPC_SERVICES_H_
#define HILO_SERVICE_GRPC_SERVICES_H_

#include "hilo/v1/hilo.grpc.pb.h"
#include "service/admin_service.h"
#include "service/hilo_service.h"

namespace hilo {

class GrpcHiLoService final : public hilo::v1::HiLo::CallbackService {
 public:
  // `service` must outlive this.
  explicit GrpcHiLoService(HiLoService* service) : service_(service) {}

  grpc::ServerUnaryReactor* NextRange(
      grpc::CallbackServerContext* context,
      const hilo::v1::NextRangeRequest* request,
      hilo::v1::NextRangeResponse* response) override;
  grpc::ServerUnaryReactor* ReturnRange(
      grpc::CallbackServerContext* context,
      const hilo::v1::ReturnRangeRequest* request,
      hilo::v1::ReturnRangeResponse* response) override;

 private:
  HiLoService* const service_;
};

class GrpcAdminService final : public hilo::v1::HiLoAdmin::CallbackService {
 public:
  // `service` must outlive this.
  explicit GrpcAdminService(AdminService* service) : service_(service) {}

  grpc::ServerUnaryReactor* GetCollection(
      grpc::CallbackServerContext* context,
      const hilo::v1::GetCollectionRequest* request,
      hilo::v1::GetCollectionResponse* response) override;
  grpc::ServerUnaryReactor* ListCollections(
      grpc::CallbackServerContext* context,
      const hilo::v1::ListCollectionsRequest* request,
      hilo::v1::ListCollectionsResponse* response) override;
  grpc::ServerUnaryReactor* SetFloor(
      grpc::CallbackServerContext* context,
      const hilo::v1::SetFloorRequest* request,
      hilo::v1::SetFloorResponse* response) override;

 private:
  AdminService* const service_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_GRPC_SERVICES_H_
