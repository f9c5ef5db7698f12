#include "stress/raw_call.h"

#include <future>

#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace hilo::stress {

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response, absl::Duration deadline) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer,
                 &response_buffer,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (status.ok()) {
    grpc::Slice reply;
    if (!response_buffer.DumpToSingleSlice(&reply).ok()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "reply could not be read");
    }
    response->assign(reinterpret_cast<const char*>(reply.begin()),
                     reply.size());
  }
  return status;
}

grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                         bool* serving, absl::Duration deadline) {
  // HealthCheckRequest{service: ""} is empty on the wire; the reply
  // HealthCheckResponse{status: SERVING} is field 1 varint 1.
  std::string reply;
  grpc::Status s = RawUnaryCall(channel, "/grpc.health.v1.Health/Check", "",
                                &reply, deadline);
  if (s.ok()) *serving = reply == std::string("\x08\x01", 2);
  return s;
}

}  // namespace hilo::stress
