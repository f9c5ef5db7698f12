// RawUnaryCall: one unary gRPC call with the request as raw bytes, for
// requests no generated stub can send (unknown fields, broken encodings) and
// services whose stubs are not at hand (grpc.health.v1).
//
//   std::string reply;
//   grpc::Status s = RawUnaryCall(*channel, "/hilo.v1.HiLo/NextRange",
//                                 request_bytes, &reply, absl::Seconds(5));
//
// Thread-safe.
#ifndef HILO_STRESS_RAW_CALL_H_
#define HILO_STRESS_RAW_CALL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"

namespace hilo::stress {

// Calls `method` ("/package.Service/Method") on `channel` with `request` as
// the message bytes; on OK, `*response` holds the reply's bytes.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method, const std::string& request,
                          std::string* response, absl::Duration deadline);

// grpc.health.v1.Health/Check for the whole server: OK and true when it
// answers SERVING, OK and false for any other status.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                         bool* serving, absl::Duration deadline);

}  // namespace hilo::stress

#endif  // HILO_STRESS_RAW_CALL_H_
