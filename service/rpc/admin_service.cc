#include "service/rpc/admin_service.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/base/await.h"
#include "hilo/v1/conversions.h"
#include "service/access/collection_limit.h"
#include "service/store/collection_rules.h"
#include "service/store/validation.h"

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

AdminService::AdminService(RangeStore* store, std::string node_tag,
                           int max_list_reply_bytes,
                           CollectionLimit* collections)
    : store_(store),
      node_tag_(std::move(node_tag)),
      max_list_reply_bytes_(max_list_reply_bytes),
      collections_(collections) {}

void AdminService::GetCollection(const hilo::v1::GetCollectionRequest& request,
                                 hilo::v1::GetCollectionResponse* response,
                                 ServiceCallback done) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    done(std::move(s));
    return;
  }
  store_->GetAsync(
      request.collection(),
      [this, &request, response, done = std::move(done)](
          absl::StatusOr<std::optional<CollectionState>> state) mutable {
        if (!state.ok()) return done(state.status());
        if (!state->has_value()) {
          return done(absl::NotFoundError(
              absl::StrFormat("collection \"%s\" has no row on node %s",
                              request.collection(), node_tag_)));
        }
        ToProto(request.collection(), **state, response->mutable_collection());
        response->set_node_tag(node_tag_);
        done(absl::OkStatus());
      });
}

void AdminService::ListCollections(
    const hilo::v1::ListCollectionsRequest& request,
    hilo::v1::ListCollectionsResponse* response, ServiceCallback done) {
  if (request.page_size() < 0 || request.page_size() > kMaxListPageSize) {
    return done(absl::InvalidArgumentError(absl::StrFormat(
        "page_size is %d; it must be 0 (default %d) to %d", request.page_size(),
        kDefaultListPageSize, kMaxListPageSize)));
  }
  // The token is the last name of the previous page.
  if (!request.page_token().empty()) {
    if (absl::Status s = ValidateCollectionName(request.page_token());
        !s.ok()) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "page_token is not one this server issued: ", s.message())));
    }
  }
  const int page_size =
      request.page_size() == 0 ? kDefaultListPageSize : request.page_size();
  // One extra row tells whether another page follows.
  store_->ListAsync(
      request.page_token(), page_size + 1,
      [this, page_size, response, done = std::move(done)](
          absl::StatusOr<std::vector<NamedCollectionState>> rows) mutable {
        if (!rows.ok()) return done(rows.status());
        bool more = static_cast<int>(rows->size()) > page_size;
        if (more) rows->pop_back();
        size_t bytes = 0;
        for (size_t i = 0; i < rows->size(); ++i) {
          hilo::v1::Collection row;
          ToProto((*rows)[i].name, (*rows)[i].state, &row);
          bytes += row.ByteSizeLong() + 3;  // with its tag and length
          // The page ends before the row that would pass the bound; the
          // first row always fits.
          if (i > 0 && bytes > static_cast<size_t>(max_list_reply_bytes_)) {
            rows->resize(i);
            more = true;
            break;
          }
          *response->add_collections() = std::move(row);
        }
        if (more) response->set_next_page_token(rows->back().name);
        response->set_node_tag(node_tag_);
        done(absl::OkStatus());
      });
}

void AdminService::SetFloor(const hilo::v1::SetFloorRequest& request,
                            hilo::v1::SetFloorResponse* response,
                            ServiceCallback done) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return done(std::move(s));
  }
  if (absl::Status s =
          ValidateFloor("floor", request.floor(), request.collection());
      !s.ok()) {
    return done(std::move(s));
  }
  auto set_floor = [this, &request, response](bool reserved,
                                              ServiceCallback done) {
    store_->SetFloorAsync(
        request.collection(), request.floor(),
        [this, response, reserved,
         done = std::move(done)](absl::StatusOr<FloorOutcome> outcome) mutable {
          if (collections_ != nullptr) {
            collections_->Settle(reserved, outcome.ok() && outcome->created);
          }
          if (!outcome.ok()) return done(outcome.status());
          response->set_raised(outcome->raised);
          response->set_max(outcome->max);
          done(absl::OkStatus());
        });
  };
  if (collections_ == nullptr) return set_floor(false, std::move(done));
  if (collections_->TryReserve()) return set_floor(true, std::move(done));
  // At the collection limit: only a collection that has a row may go on.
  store_->GetAsync(
      request.collection(),
      [this, &request, set_floor, done = std::move(done)](
          absl::StatusOr<std::optional<CollectionState>> row) mutable {
        if (!row.ok()) return done(row.status());
        if (!row->has_value()) {
          return done(collections_->RefuseNewCollection(request.collection()));
        }
        set_floor(false, std::move(done));
      });
}

void AdminService::DeleteCollection(
    const hilo::v1::DeleteCollectionRequest& request,
    hilo::v1::DeleteCollectionResponse* response, ServiceCallback done) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return done(std::move(s));
  }
  StoreCallback<CollectionState> removed =
      [this, response, retire = request.retire(),
       done = std::move(done)](absl::StatusOr<CollectionState> row) mutable {
        if (!row.ok()) return done(row.status());
        if (collections_ != nullptr) collections_->Deleted();
        response->set_node_tag(node_tag_);
        if (retire) response->set_retired_max(RetiredMax(*row));
        done(absl::OkStatus());
      };
  if (request.retire()) {
    store_->RetireAsync(request.collection(), std::move(removed));
  } else {
    store_->DeleteAsync(request.collection(), std::move(removed));
  }
}

absl::Status AdminService::DoGetCollection(
    const hilo::v1::GetCollectionRequest& request,
    hilo::v1::GetCollectionResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    GetCollection(request, response, std::move(done));
  });
}

absl::Status AdminService::DoListCollections(
    const hilo::v1::ListCollectionsRequest& request,
    hilo::v1::ListCollectionsResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    ListCollections(request, response, std::move(done));
  });
}

absl::Status AdminService::DoDeleteCollection(
    const hilo::v1::DeleteCollectionRequest& request,
    hilo::v1::DeleteCollectionResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    DeleteCollection(request, response, std::move(done));
  });
}

absl::Status AdminService::DoSetFloor(const hilo::v1::SetFloorRequest& request,
                                      hilo::v1::SetFloorResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    SetFloor(request, response, std::move(done));
  });
}

}  // namespace hilo
