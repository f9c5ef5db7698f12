// The gRPC faces of HiLoService and AdminService, on gRPC's callback API.
//
// Each handler takes the call's default reactor, hands the request to the
// service and returns; the service's completion, which runs once the
// store's commit is durable, finishes the call. No thread waits for a
// commit, however many calls are in flight. This is the one place where the
// server turns an absl::Status into a grpc::Status (with ToGrpcStatus of
// hilo/v1/conversions.h), and where it reads who is calling (CallerOf): the
// Gatekeeper decides what that caller may do.
//
// Thread-safe.
#ifndef HILO_SERVICE_RPC_GRPC_SERVICES_H_
#define HILO_SERVICE_RPC_GRPC_SERVICES_H_

#include "hilo/v1/hilo.grpc.pb.h"
#include "service/access/authorizer.h"
#include "service/rpc/busy_scheduling.h"
#include "service/rpc/call_gate.h"
#include "service/rpc/gatekeeper.h"
#include "service/rpc/reply_coalescer.h"

namespace hilo {

// The caller of a call: the identities its client certificate carries (SAN
// URIs, SAN DNS names, subject CN, from gRPC's AuthContext), its bearer
// token (metadata "authorization: Bearer <token>", read only when
// `read_tokens`: gRPC builds a map of the metadata for the first look, two
// allocations a call that nothing needs without an Authorizer) and its peer
// address.
Caller CallerOf(const grpc::ServerContextBase& context, bool read_tokens);

class GrpcHiLoService final : public hilo::v1::HiLo::CallbackService {
 public:
  // `gate`, `calls`, `busy` and `replies` (each unless null) must outlive
  // this. Every call passes `calls`, then `busy`, before it reaches `gate`;
  // `replies` sees each reply before it is written.
  GrpcHiLoService(Gatekeeper* gate, CallGate* calls, BusyScheduling* busy,
                  ReplyCoalescer* replies)
      : gate_(gate), calls_(calls), busy_(busy), replies_(replies) {}

  grpc::ServerUnaryReactor* NextRange(
      grpc::CallbackServerContext* context,
      const hilo::v1::NextRangeRequest* request,
      hilo::v1::NextRangeResponse* response) override;
  grpc::ServerUnaryReactor* ReturnRange(
      grpc::CallbackServerContext* context,
      const hilo::v1::ReturnRangeRequest* request,
      hilo::v1::ReturnRangeResponse* response) override;
  grpc::ServerUnaryReactor* ReturnRanges(
      grpc::CallbackServerContext* context,
      const hilo::v1::ReturnRangesRequest* request,
      hilo::v1::ReturnRangesResponse* response) override;

 private:
  Gatekeeper* const gate_;
  CallGate* const calls_;
  BusyScheduling* const busy_;
  ReplyCoalescer* const replies_;
};

class GrpcAdminService final : public hilo::v1::HiLoAdmin::CallbackService {
 public:
  // `gate`, `calls`, `busy` and `replies` (each unless null) must outlive
  // this. Every call passes `calls`, then `busy`, before it reaches `gate`;
  // `replies` sees each reply before it is written.
  GrpcAdminService(Gatekeeper* gate, CallGate* calls, BusyScheduling* busy,
                   ReplyCoalescer* replies)
      : gate_(gate), calls_(calls), busy_(busy), replies_(replies) {}

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
  grpc::ServerUnaryReactor* DeleteCollection(
      grpc::CallbackServerContext* context,
      const hilo::v1::DeleteCollectionRequest* request,
      hilo::v1::DeleteCollectionResponse* response) override;

 private:
  Gatekeeper* const gate_;
  CallGate* const calls_;
  BusyScheduling* const busy_;
  ReplyCoalescer* const replies_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_GRPC_SERVICES_H_
