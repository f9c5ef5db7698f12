#include "service/hilo_service.h"

#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "service/grpc_status.h"
#include "service/proto_time.h"
#include "service/validation.h"

namespace hilo {

HiLoService::HiLoService(RangeStore* store, RangeSizePolicy policy,
                         std::string node_tag, const Clock* clock,
                         Observer* observer)
    : store_(store),
      policy_(policy),
      node_tag_(std::move(node_tag)),
      clock_(clock),
      observer_(observer) {}

absl::Status HiLoService::DoNextRange(const hilo::v1::NextRangeRequest& request,
                                      hilo::v1::NextRangeResponse* response) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return s;
  }
  if (request.last_size() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "last_size is %d; it must not be negative", request.last_size()));
  }
  if (request.last_max() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "last_max is %d; it must not be negative", request.last_max()));
  }
  std::optional<absl::Time> last_range_at;
  if (request.has_last_range_at()) {
    absl::StatusOr<absl::Time> t =
        FromProtoTime(request.last_range_at(), "last_range_at");
    if (!t.ok()) return t.status();
    last_range_at = *t;
  }
  const absl::Time now = clock_->Now();
  const int64_t size =
      policy_.NextSize(request.last_size(), last_range_at, now);
  absl::StatusOr<Range> range =
      store_->Allocate(request.collection(), size, request.last_max());
  if (!range.ok()) return range.status();
  response->set_low(range->low);
  response->set_high(range->high);
  response->set_node_tag(node_tag_);
  ToProtoTime(now, response->mutable_range_at());
  return absl::OkStatus();
}

absl::Status HiLoService::DoReturnRange(
    const hilo::v1::ReturnRangeRequest& request,
    hilo::v1::ReturnRangeResponse* response) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return s;
  }
  if (request.end() < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "end is %d; a range's high is at least 1", request.end()));
  }
  if (request.last() < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("last is %d; it must not be negative", request.last()));
  }
  if (request.last() > request.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "last %d is above end %d", request.last(), request.end()));
  }
  if (!request.node_tag().empty() && request.node_tag() != node_tag_) {
    // Another node's range: its numbers are not ours to take back.
    absl::StatusOr<std::optional<CollectionState>> state =
        store_->Get(request.collection());
    if (!state.ok()) return state.status();
    response->set_applied(false);
    response->set_max(state->has_value() ? (*state)->max : 0);
    return absl::OkStatus();
  }
  absl::StatusOr<ReturnOutcome> outcome =
      store_->Return(request.collection(), request.end(), request.last());
  if (!outcome.ok()) return outcome.status();
  response->set_applied(outcome->applied);
  response->set_max(outcome->max);
  return absl::OkStatus();
}

grpc::Status HiLoService::NextRange(grpc::ServerContext* context,
                                    const hilo::v1::NextRangeRequest* request,
                                    hilo::v1::NextRangeResponse* response) {
  const absl::Time start = absl::Now();
  const absl::Status status = DoNextRange(*request, response);
  if (observer_ != nullptr) {
    const Range range{response->low(), response->high()};
    observer_->OnNextRange(request->collection(), status,
                           status.ok() ? &range : nullptr, absl::Now() - start);
  }
  return ToGrpcStatus(status);
}

grpc::Status HiLoService::ReturnRange(
    grpc::ServerContext* context, const hilo::v1::ReturnRangeRequest* request,
    hilo::v1::ReturnRangeResponse* response) {
  const absl::Time start = absl::Now();
  const absl::Status status = DoReturnRange(*request, response);
  if (observer_ != nullptr) {
    const ReturnOutcome outcome{response->applied(), response->max()};
    observer_->OnReturnRange(request->collection(), status,
                             status.ok() ? &outcome : nullptr,
                             absl::Now() - start);
  }
  return ToGrpcStatus(status);
}

}  // namespace hilo
