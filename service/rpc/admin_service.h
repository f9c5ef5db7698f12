// AdminService: what hilo.v1.HiLoAdmin does, for operators, without gRPC.
//
// Reads a collection's row, lists rows a page at a time, raises a floor
// (never lowers it), and deletes a row that never kept a number
// (CheckDeletable). Same validation as HiLoService; an unknown collection is
// NOT_FOUND. Like HiLoService, each call starts the store's work and
// returns; `done` gets the outcome. GrpcAdminService (grpc_services.h)
// serves it over gRPC.
//
// Thread-safe.
#ifndef HILO_SERVICE_RPC_ADMIN_SERVICE_H_
#define HILO_SERVICE_RPC_ADMIN_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "hilo/v1/hilo.pb.h"
#include "service/rpc/hilo_service.h"
#include "service/store/range_store.h"

namespace hilo {

inline constexpr int kDefaultListPageSize = 100;
inline constexpr int kMaxListPageSize = 1000;
// A ListCollections reply stops adding collections once it holds this many
// bytes of them (at least one collection always fits): about 200 rows of
// 256-byte names, so replies a client never reads cannot pile up server
// memory 300 KB at a time.
inline constexpr int kDefaultMaxListReplyBytes = 64 * 1024;

class CollectionLimit;

class AdminService {
 public:
  // `store` must outlive the service, and so must `collections` (null: no
  // limit), which bounds the collections a SetFloor may create
  // (RESOURCE_EXHAUSTED past it). A ListCollections page ends early, with a
  // next_page_token, once it holds `max_list_reply_bytes` of collections.
  AdminService(RangeStore* store, std::string node_tag,
               int max_list_reply_bytes = kDefaultMaxListReplyBytes,
               CollectionLimit* collections = nullptr);

  // Fill `response`, then call `done` exactly once. `request` and
  // `response` must stay valid until then.
  void GetCollection(const hilo::v1::GetCollectionRequest& request,
                     hilo::v1::GetCollectionResponse* response,
                     ServiceCallback done);
  void ListCollections(const hilo::v1::ListCollectionsRequest& request,
                       hilo::v1::ListCollectionsResponse* response,
                       ServiceCallback done);
  void SetFloor(const hilo::v1::SetFloorRequest& request,
                hilo::v1::SetFloorResponse* response, ServiceCallback done);
  // A deleted (or, with retire, retired) row gives its place under the
  // collection limit back.
  void DeleteCollection(const hilo::v1::DeleteCollectionRequest& request,
                        hilo::v1::DeleteCollectionResponse* response,
                        ServiceCallback done);

  // The same, waiting for the outcome.
  absl::Status DoGetCollection(const hilo::v1::GetCollectionRequest& request,
                               hilo::v1::GetCollectionResponse* response);
  absl::Status DoListCollections(
      const hilo::v1::ListCollectionsRequest& request,
      hilo::v1::ListCollectionsResponse* response);
  absl::Status DoSetFloor(const hilo::v1::SetFloorRequest& request,
                          hilo::v1::SetFloorResponse* response);
  absl::Status DoDeleteCollection(
      const hilo::v1::DeleteCollectionRequest& request,
      hilo::v1::DeleteCollectionResponse* response);

 private:
  RangeStore* const store_;
  const std::string node_tag_;
  const int max_list_reply_bytes_;
  CollectionLimit* const collections_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_ADMIN_SERVICE_H_
