#include "service/rpc/grpc_services.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "hilo/v1/conversions.h"

namespace hilo {
namespace {

// Appends "<kind><value>" for each value of `property`.
void AddIdentities(const grpc::AuthContext& auth, const char* property,
                   absl::string_view kind, std::vector<std::string>* out) {
  for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
    out->push_back(
        absl::StrCat(kind, absl::string_view(value.data(), value.size())));
  }
}

// Passes the call to `method` of `gate`, for the caller CallerOf reads,
// with a completion that finishes the gRPC call, if `calls` lets it in;
// UNAVAILABLE without starting it once the server is stopping. `busy`
// (unless null) is told the calls in flight first; `replies` (unless null)
// sees the reply before it is written, if a batch of the store's finishes
// it (reading the peer's address only then).
template <typename Request, typename Response>
grpc::ServerUnaryReactor* Serve(
    CallGate* calls, BusyScheduling* busy, ReplyCoalescer* replies,
    Gatekeeper* gate, grpc::CallbackServerContext* context,
    void (Gatekeeper::*method)(const Caller&, const Request&, Response*,
                               ServiceCallback),
    const Request* request, Response* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!calls->Enter()) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping"));
    return reactor;
  }
  if (busy != nullptr) busy->Serving(calls->inside());
  (gate->*method)(
      CallerOf(*context, gate->ReadsTokens()), *request, response,
      [reactor, calls, replies, context](absl::Status status) {
        if (replies != nullptr && CompletionBatch::Current() != nullptr) {
          replies->BeforeReply(context->peer());
        }
        reactor->Finish(ToGrpcStatus(status));
        calls->Leave();
      });
  return reactor;
}

}  // namespace

Caller CallerOf(const grpc::ServerContextBase& context, bool read_tokens) {
  Caller caller;
  caller.peer = context.peer();
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  // Only a verified client certificate makes the context authenticated.
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    AddIdentities(*auth, GRPC_PEER_URI_PROPERTY_NAME,
                  "uri:", &caller.certificate_identities);
    AddIdentities(*auth, GRPC_PEER_DNS_PROPERTY_NAME,
                  "dns:", &caller.certificate_identities);
    AddIdentities(*auth, GRPC_X509_CN_PROPERTY_NAME,
                  "cn:", &caller.certificate_identities);
  }
  if (!read_tokens) return caller;
  constexpr absl::string_view kBearer = "Bearer ";
  const auto& metadata = context.client_metadata();
  caller.authorization_headers =
      static_cast<int>(metadata.count("authorization"));
  auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    caller.has_bearer_token = true;
    // Anything but "Bearer <token>" is a token no list holds.
    if (absl::StartsWith(value, kBearer))
      value.remove_prefix(kBearer.size());
    else
      value = absl::string_view();
    caller.bearer_token = std::string(value);
  }
  return caller;
}

grpc::ServerUnaryReactor* GrpcHiLoService::NextRange(
    grpc::CallbackServerContext* context,
    const hilo::v1::NextRangeRequest* request,
    hilo::v1::NextRangeResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context, &Gatekeeper::NextRange,
               request, response);
}

grpc::ServerUnaryReactor* GrpcHiLoService::ReturnRange(
    grpc::CallbackServerContext* context,
    const hilo::v1::ReturnRangeRequest* request,
    hilo::v1::ReturnRangeResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context,
               &Gatekeeper::ReturnRange, request, response);
}

grpc::ServerUnaryReactor* GrpcHiLoService::ReturnRanges(
    grpc::CallbackServerContext* context,
    const hilo::v1::ReturnRangesRequest* request,
    hilo::v1::ReturnRangesResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context,
               &Gatekeeper::ReturnRanges, request, response);
}

grpc::ServerUnaryReactor* GrpcAdminService::GetCollection(
    grpc::CallbackServerContext* context,
    const hilo::v1::GetCollectionRequest* request,
    hilo::v1::GetCollectionResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context,
               &Gatekeeper::GetCollection, request, response);
}

grpc::ServerUnaryReactor* GrpcAdminService::ListCollections(
    grpc::CallbackServerContext* context,
    const hilo::v1::ListCollectionsRequest* request,
    hilo::v1::ListCollectionsResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context,
               &Gatekeeper::ListCollections, request, response);
}

grpc::ServerUnaryReactor* GrpcAdminService::SetFloor(
    grpc::CallbackServerContext* context,
    const hilo::v1::SetFloorRequest* request,
    hilo::v1::SetFloorResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context, &Gatekeeper::SetFloor,
               request, response);
}

grpc::ServerUnaryReactor* GrpcAdminService::DeleteCollection(
    grpc::CallbackServerContext* context,
    const hilo::v1::DeleteCollectionRequest* request,
    hilo::v1::DeleteCollectionResponse* response) {
  return Serve(calls_, busy_, replies_, gate_, context,
               &Gatekeeper::DeleteCollection, request, response);
}

}  // namespace hilo
