// Conversions between absl::Time and google.protobuf.Timestamp.
#ifndef HILO_SERVICE_PROTO_TIME_H_
#define HILO_SERVICE_PROTO_TIME_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace hilo {

// INVALID_ARGUMENT, naming `field`, if `ts` is outside Timestamp's valid
// span (years 1-9999, nanos in [0, 1e9)).
absl::StatusOr<absl::Time> FromProtoTime(const google::protobuf::Timestamp& ts,
                                         absl::string_view field);

void ToProtoTime(absl::Time t, google::protobuf::Timestamp* ts);

}  // namespace hilo

#endif  // HILO_SERVICE_PROTO_TIME_H_
