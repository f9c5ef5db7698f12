#include "service/grpc_services.h"

#include <utility>

#include "hilo/v1/conversions.h"

namespace hilo {
namespace {

// Starts `call` with a completion that finishes the gRPC call.
template <typename Call>
grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  call([reactor](absl::Status status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* GrpcHiLoService::NextRange(
    grpc::CallbackServerContext* context,
    const hilo::v1::NextRangeRequest* request,
    hilo::v1::NextRangeResponse* response) {
  return Serve(context, [&](ServiceCallback done) {
    service_->NextRange(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* GrpcHiLoService::ReturnRange(
    grpc::CallbackServerContext* context,
    const hilo::v1::ReturnRangeRequest* request,
    hilo::v1::ReturnRangeResponse* response) {
  return Serve(context, [&](ServiceCallback done) {
    service_->ReturnRange(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* GrpcAdminService::GetCollection(
    grpc::CallbackServerContext* context,
    const hilo::v1::GetCollectionRequest* request,
    hilo::v1::GetCollectionResponse* response) {
  return Serve(context, [&](ServiceCallback done) {
    service_->GetCollection(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* GrpcAdminService::ListCollections(
    grpc::CallbackServerContext* context,
    const hilo::v1::ListCollectionsRequest* request,
    hilo::v1::ListCollectionsResponse* response) {
  return Serve(context, [&](ServiceCallback done) {
    service_->ListCollections(*request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* GrpcAdminService::SetFloor(
    grpc::CallbackServerContext* context,
    const hilo::v1::SetFloorRequest* request,
    hilo::v1::SetFloorResponse* response) {
  return Serve(context, [&](ServiceCallback done) {
    service_->SetFloor(*request, response, std::move(done));
  });
}

}  // namespace hilo
