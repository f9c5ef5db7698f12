#include "hilo/v1/conversions.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace hilo {
namespace {

// google.protobuf.Timestamp's valid span: 0001-01-01 to 9999-12-31.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

void ToProtoTime(absl::Time t, google::protobuf::Timestamp* ts) {
  const int64_t seconds = absl::ToUnixSeconds(t);
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

absl::StatusOr<absl::Time> FromProtoTime(const google::protobuf::Timestamp& ts,
                                         absl::string_view field) {
  if (ts.seconds() < kMinTimestampSeconds ||
      ts.seconds() > kMaxTimestampSeconds || ts.nanos() < 0 ||
      ts.nanos() > 999999999) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s (seconds %d, nanos %d) is not a valid timestamp",
                        field, ts.seconds(), ts.nanos()));
  }
  return FromProtoTimeUnchecked(ts);
}

absl::Time FromProtoTimeUnchecked(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

}  // namespace hilo
