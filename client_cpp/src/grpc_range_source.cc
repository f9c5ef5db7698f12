#include "client_cpp/src/grpc_range_source.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"

namespace hilo::internal {
namespace {

absl::Status FromGrpc(const grpc::Status& status, absl::string_view target) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(target, ": ", status.error_message()));
}

// The call may succeed on another target, or on the same one a little later.
bool IsTransient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// OK, or what is wrong with a NextRange reply.
absl::Status CheckReply(const hilo::v1::NextRangeResponse& response) {
  if (response.low() < 1 || response.high() < response.low()) {
    return absl::InternalError(
        absl::StrFormat("NextRange replied with the invalid range [%d, %d]",
                        response.low(), response.high()));
  }
  if (!IsValidNodeTag(response.node_tag())) {
    return absl::InternalError(absl::StrFormat(
        "NextRange replied with node tag \"%s\", which is not 1-%d "
        "characters of A-Z and 0-9",
        absl::CHexEscape(response.node_tag()), kMaxNodeTagSize));
  }
  return absl::OkStatus();
}

std::string DescribeStatus(const grpc::Status& status) {
  return absl::StrFormat("%s: %s",
                         absl::StatusCodeToString(static_cast<absl::StatusCode>(
                             status.error_code())),
                         status.error_message());
}

void ToProto(absl::Time t, google::protobuf::Timestamp* ts) {
  const int64_t seconds = absl::ToUnixSeconds(t);
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

}  // namespace

GrpcRangeSource::GrpcRangeSource(std::vector<Target> targets,
                                 absl::Duration rpc_deadline,
                                 ReturnRetryPolicy return_retry)
    : targets_(std::move(targets)),
      rpc_deadline_(rpc_deadline),
      return_retry_(return_retry) {
  const bool any_channel =
      std::any_of(targets_.begin(), targets_.end(),
                  [](const Target& t) { return t.channel != nullptr; });
  if (any_channel) keeper_ = std::thread([this] { KeepConnected(); });
}

GrpcRangeSource::~GrpcRangeSource() {
  {
    std::lock_guard<std::mutex> lock(keeper_mu_);
    stopping_ = true;
  }
  keeper_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

void GrpcRangeSource::KeepConnected() {
  // Short slices, so the destructor never waits long.
  constexpr auto kSlice = std::chrono::milliseconds(100);
  while (true) {
    bool all_ready = true;
    for (const Target& target : targets_) {
      if (target.channel == nullptr) continue;
      const grpc_connectivity_state state =
          target.channel->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY) continue;
      all_ready = false;
      // Waiting polls the channel, which is what moves its connection on.
      target.channel->WaitForStateChange(
          state, std::chrono::system_clock::now() + kSlice / 2);
    }
    std::unique_lock<std::mutex> lock(keeper_mu_);
    if (stopping_) return;
    if (all_ready) {
      keeper_cv_.wait_for(lock, kSlice, [this] { return stopping_; });
      if (stopping_) return;
    }
  }
}

std::string GrpcRangeSource::Describe() const {
  return absl::StrJoin(targets_, ", ", [](std::string* out, const Target& t) {
    out->append(t.name);
  });
}

absl::StatusOr<IssuedRange> GrpcRangeSource::Next(
    absl::string_view collection, const PreviousRange& previous) {
  hilo::v1::NextRangeRequest request;
  request.set_collection(std::string(collection));
  request.set_last_size(previous.size);
  request.set_last_max(previous.max);
  if (previous.range_at.has_value()) {
    ToProto(*previous.range_at, request.mutable_last_range_at());
  }
  std::vector<std::string> failures;
  bool any_invalid = false;
  const size_t first = preferred_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < targets_.size(); ++i) {
    const size_t index = (first + i) % targets_.size();
    const Target& target = targets_[index];
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + rpc_deadline_));
    hilo::v1::NextRangeResponse response;
    const grpc::Status status =
        target.stub->NextRange(&context, request, &response);
    if (status.ok()) {
      const absl::Status valid = CheckReply(response);
      if (valid.ok()) {
        preferred_.store(index, std::memory_order_relaxed);
        if (i > 0) failovers_.fetch_add(1, std::memory_order_relaxed);
        return IssuedRange{response.low(),
                           response.high(),
                           response.node_tag(),
                           FromProto(response.range_at()),
                           index,
                           response.range_token()};
      }
      // A misbehaving server: its range is skipped, the next one is asked.
      any_invalid = true;
      failures.push_back(absl::StrCat(target.name, ": ", valid.message()));
      continue;
    }
    if (!IsTransient(status)) return FromGrpc(status, target.name);
    failures.push_back(absl::StrCat(target.name, ": ", DescribeStatus(status)));
  }
  if (any_invalid) {
    return absl::InternalError(
        absl::StrFormat("no hilo server gave a usable range of \"%s\": %s",
                        collection, absl::StrJoin(failures, "; ")));
  }
  return absl::UnavailableError(
      absl::StrFormat("no hilo server answered NextRange for \"%s\": %s",
                      collection, absl::StrJoin(failures, "; ")));
}

absl::StatusOr<ReturnResult> GrpcRangeSource::Return(
    absl::string_view collection, const IssuedRange& range, int64_t last) {
  const Target& target = targets_[range.source % targets_.size()];
  hilo::v1::ReturnRangeRequest request;
  request.set_collection(std::string(collection));
  request.set_end(range.high);
  request.set_last(last);
  request.set_node_tag(range.node_tag);
  request.set_range_token(range.token);
  // Without a token a late copy could apply after the numbers were issued
  // again: such a return is sent once.
  const int attempts =
      range.token != 0 ? std::max(1, return_retry_.attempts) : 1;
  const absl::Time deadline = absl::Now() + rpc_deadline_;
  absl::Duration backoff = return_retry_.backoff;
  std::vector<std::string> failures;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    // Each attempt gets an equal share of the time left, so one that times
    // out still leaves room for the next.
    const absl::Duration left = deadline - absl::Now();
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + left / (attempts - attempt + 1)));
    hilo::v1::ReturnRangeResponse response;
    const grpc::Status status =
        target.stub->ReturnRange(&context, request, &response);
    if (status.ok()) return ReturnResult{response.applied(), response.max()};
    failures.push_back(DescribeStatus(status));
    const bool retry = IsTransient(status) && attempt < attempts &&
                       absl::Now() + backoff < deadline;
    if (!retry) {
      if (attempt == 1) return FromGrpc(status, target.name);
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrFormat("%s: ReturnRange failed %d times within %s: %s",
                          target.name, attempt,
                          absl::FormatDuration(rpc_deadline_),
                          absl::StrJoin(failures, "; ")));
    }
    absl::SleepFor(backoff);
    backoff *= 2;
  }
}

}  // namespace hilo::internal
