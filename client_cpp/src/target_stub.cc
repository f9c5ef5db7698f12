#include "client_cpp/src/target_stub.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client_cpp/src/attribution.h"
#include "grpcpp/client_context.h"
#include "hilo/v1/conversions.h"

namespace hilo::internal {

bool IsTransient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

TargetStub::TargetStub(std::string name,
                       std::unique_ptr<hilo::v1::HiLo::StubInterface> stub,
                       std::shared_ptr<grpc::Channel> channel,
                       const MonotonicClock* clock)
    : name_(std::move(name)),
      stub_(std::move(stub)),
      channel_(std::move(channel)),
      clock_(clock) {}

absl::StatusOr<hilo::v1::NextRangeResponse> TargetStub::NextRange(
    const hilo::v1::NextRangeRequest& request, absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(timeout));
  hilo::v1::NextRangeResponse response;
  const absl::Status status =
      FromGrpcStatus(stub_->NextRange(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

template <typename Response, typename Call>
absl::StatusOr<Response> TargetStub::CallWithRetries(
    const char* method, Call call, int attempts, absl::Duration backoff,
    absl::Duration timeout) const {
  attempts = std::max(1, attempts);
  const MonotonicClock::TimePoint deadline = After(clock_->Now(), timeout);
  std::vector<std::string> failures;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    // Each attempt gets an equal share of the time left, so one that times
    // out still leaves room for the next.
    const absl::Duration left = TimeLeft(clock_->Now(), deadline);
    context.set_deadline(DeadlineIn(left / (attempts - attempt + 1)));
    Response response;
    const absl::Status status = FromGrpcStatus(call(&context, &response));
    if (status.ok()) return response;
    failures.push_back(status.ToString());
    const bool retry = IsTransient(status) && attempt < attempts &&
                       TimeLeft(clock_->Now(), deadline) > backoff;
    if (!retry) {
      if (attempt == 1) return AttributedTo(name_, status);
      return absl::Status(
          status.code(),
          absl::StrFormat("%s: %s failed %d times within %s: %s", name_, method,
                          attempt, absl::FormatDuration(timeout),
                          absl::StrJoin(failures, "; ")));
    }
    clock_->SleepFor(backoff);
    backoff *= 2;
  }
}

absl::StatusOr<ReturnResult> TargetStub::ReturnRange(
    const hilo::v1::ReturnRangeRequest& request, int attempts,
    absl::Duration backoff, absl::Duration timeout) const {
  absl::StatusOr<hilo::v1::ReturnRangeResponse> response =
      CallWithRetries<hilo::v1::ReturnRangeResponse>(
          "ReturnRange",
          [&](grpc::ClientContext* context,
              hilo::v1::ReturnRangeResponse* out) {
            return stub_->ReturnRange(context, request, out);
          },
          attempts, backoff, timeout);
  if (!response.ok()) return response.status();
  return ReturnResult{response->applied(), response->max()};
}

absl::StatusOr<hilo::v1::ReturnRangesResponse> TargetStub::ReturnRanges(
    const hilo::v1::ReturnRangesRequest& request, int attempts,
    absl::Duration backoff, absl::Duration timeout) const {
  return CallWithRetries<hilo::v1::ReturnRangesResponse>(
      "ReturnRanges",
      [&](grpc::ClientContext* context, hilo::v1::ReturnRangesResponse* out) {
        return stub_->ReturnRanges(context, request, out);
      },
      attempts, backoff, timeout);
}

}  // namespace hilo::internal
