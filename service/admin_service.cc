#include "service/admin_service.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/grpc_status.h"
#include "service/proto_time.h"
#include "service/validation.h"

namespace hilo {
namespace {

void ToProto(absl::string_view name, const CollectionState& state,
             hilo::v1::Collection* out) {
  out->set_name(std::string(name));
  out->set_max(state.max);
  out->set_return_floor(state.return_floor);
  // Still filled for readers of the deprecated field.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  out->set_last_low(state.return_floor == std::numeric_limits<int64_t>::max()
                        ? state.return_floor
                        : state.return_floor + 1);
#pragma GCC diagnostic pop
  ToProtoTime(state.updated_at, out->mutable_updated_at());
}

}  // namespace

AdminService::AdminService(RangeStore* store, std::string node_tag)
    : store_(store), node_tag_(std::move(node_tag)) {}

absl::Status AdminService::DoGetCollection(
    const hilo::v1::GetCollectionRequest& request,
    hilo::v1::GetCollectionResponse* response) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<CollectionState>> state =
      store_->Get(request.collection());
  if (!state.ok()) return state.status();
  if (!state->has_value()) {
    return absl::NotFoundError(
        absl::StrFormat("collection \"%s\" has no row on node %s",
                        request.collection(), node_tag_));
  }
  ToProto(request.collection(), **state, response->mutable_collection());
  response->set_node_tag(node_tag_);
  return absl::OkStatus();
}

absl::Status AdminService::DoListCollections(
    const hilo::v1::ListCollectionsRequest& request,
    hilo::v1::ListCollectionsResponse* response) {
  if (request.page_size() < 0 || request.page_size() > kMaxListPageSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "page_size is %d; it must be 0 (default %d) to %d", request.page_size(),
        kDefaultListPageSize, kMaxListPageSize));
  }
  // The token is the last name of the previous page.
  if (!request.page_token().empty()) {
    if (absl::Status s = ValidateCollectionName(request.page_token());
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_token is not one this server issued: ", s.message()));
    }
  }
  const int page_size =
      request.page_size() == 0 ? kDefaultListPageSize : request.page_size();
  // One extra row tells whether another page follows.
  absl::StatusOr<std::vector<NamedCollectionState>> rows =
      store_->List(request.page_token(), page_size + 1);
  if (!rows.ok()) return rows.status();
  const bool more = static_cast<int>(rows->size()) > page_size;
  if (more) rows->pop_back();
  for (const NamedCollectionState& row : *rows) {
    ToProto(row.name, row.state, response->add_collections());
  }
  if (more) response->set_next_page_token(rows->back().name);
  response->set_node_tag(node_tag_);
  return absl::OkStatus();
}

absl::Status AdminService::DoSetFloor(const hilo::v1::SetFloorRequest& request,
                                      hilo::v1::SetFloorResponse* response) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return s;
  }
  if (request.floor() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "floor is %d; it must not be negative", request.floor()));
  }
  absl::StatusOr<FloorOutcome> outcome =
      store_->SetFloor(request.collection(), request.floor());
  if (!outcome.ok()) return outcome.status();
  response->set_raised(outcome->raised);
  response->set_max(outcome->max);
  return absl::OkStatus();
}

grpc::Status AdminService::GetCollection(
    grpc::ServerContext* context, const hilo::v1::GetCollectionRequest* request,
    hilo::v1::GetCollectionResponse* response) {
  return ToGrpcStatus(DoGetCollection(*request, response));
}

grpc::Status AdminService::ListCollections(
    grpc::ServerContext* context,
    const hilo::v1::ListCollectionsRequest* request,
    hilo::v1::ListCollectionsResponse* response) {
  return ToGrpcStatus(DoListCollections(*request, response));
}

grpc::Status AdminService::SetFloor(grpc::ServerContext* context,
                                    const hilo::v1::SetFloorRequest* request,
                                    hilo::v1::SetFloorResponse* response) {
  return ToGrpcStatus(DoSetFloor(*request, response));
}

}  // namespace hilo
