// The one place where the server turns an absl::Status into a grpc::Status.
#ifndef HILO_SERVICE_GRPC_STATUS_H_
#define HILO_SERVICE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hilo {

// Same code (the two enums share their numbering) and message.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace hilo

#endif  // HILO_SERVICE_GRPC_STATUS_H_
