#include "client_cpp/src/target_stub.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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
                       std::shared_ptr<grpc::Channel> channel)
    : name_(std::move(name)),
      stub_(std::move(stub)),
      channel_(std::move(channel)) {}

absl::StatusOr<hilo::v1::NextRangeResponse> TargetStub::NextRange(
    const hilo::v1::NextRangeRequest& request, absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  hilo::v1::NextRangeResponse response;
  const absl::Status status =
      FromGrpcStatus(stub_->NextRange(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<ReturnResult> TargetStub::ReturnRange(
    const hilo::v1::ReturnRangeRequest& request, int attempts,
    absl::Duration backoff, absl::Duration timeout) const {
  attempts = std::max(1, attempts);
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> failures;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    // Each attempt gets an equal share of the time left, so one that times
    // out still leaves room for the next.
    const absl::Duration left = deadline - absl::Now();
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + left / (attempts - attempt + 1)));
    hilo::v1::ReturnRangeResponse response;
    const absl::Status status =
        FromGrpcStatus(stub_->ReturnRange(&context, request, &response));
    if (status.ok()) return ReturnResult{response.applied(), response.max()};
    failures.push_back(status.ToString());
    const bool retry = IsTransient(status) && attempt < attempts &&
                       absl::Now() + backoff < deadline;
    if (!retry) {
      if (attempt == 1) return AttributedTo(name_, status);
      return absl::Status(
          status.code(),
          absl::StrFormat("%s: ReturnRange failed %d times within %s: %s",
                          name_, attempt, absl::FormatDuration(timeout),
                          absl::StrJoin(failures, "; ")));
    }
    absl::SleepFor(backoff);
    backoff *= 2;
  }
}

}  // namespace hilo::internal
