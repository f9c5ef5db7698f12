// Conversions between the wire types (grpc::Status,
// google.protobuf.Timestamp) and the Abseil types the rest of hilo uses.
//
// The one place where either side converts: the server turns its
// absl::Status into the grpc::Status a call finishes with, the client turns
// a call's grpc::Status back; both read and write Timestamps here.
//
//   absl::Status s = hilo::FromGrpcStatus(stub->NextRange(&ctx, req, &resp));
//
// Status codes keep their number (absl::StatusCode and grpc::StatusCode
// share the numbering); messages are kept as they are. Every function is
// thread-compatible and touches nothing but its arguments.
#ifndef HILO_PROTO_HILO_V1_CONVERSIONS_H_
#define HILO_PROTO_HILO_V1_CONVERSIONS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/status.h"

namespace hilo {

// The same code and message; OK for OK.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The same code and message; OK for OK.
absl::Status FromGrpcStatus(const grpc::Status& status);

// `t` as seconds since the Unix epoch plus nanoseconds in [0, 1e9).
void ToProtoTime(absl::Time t, google::protobuf::Timestamp* ts);

// `ts` as an absl::Time, or INVALID_ARGUMENT naming `field` if `ts` is
// outside Timestamp's valid span (years 1-9999, nanos in [0, 1e9)). For
// input the reader must refuse (the server's requests).
absl::StatusOr<absl::Time> FromProtoTime(const google::protobuf::Timestamp& ts,
                                         absl::string_view field);

// `ts` as an absl::Time without a check: for values the reader only shows
// or passes back (the client's view of a server's reply).
absl::Time FromProtoTimeUnchecked(const google::protobuf::Timestamp& ts);

}  // namespace hilo

#endif  // HILO_PROTO_HILO_V1_CONVERSIONS_H_
