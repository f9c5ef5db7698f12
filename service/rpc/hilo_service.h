// HiLoService: what hilo.v1.HiLo does, without gRPC.
//
// Validates each request, applies the range-size rule and the node-tag
// check, and leaves every durable decision to the RangeStore. The semantics
// are the ones documented in proto/hilo/v1/hilo.proto. Each call starts the
// store's work and returns; `done` receives the outcome once the store's
// commit is durable (see RangeStore), so no thread waits for a commit.
// GrpcHiLoService (grpc_services.h) serves it with gRPC's callback API.
//
//   service.NextRange(request, &response, [](absl::Status s) { ... });
//
// Thread-safe.
#ifndef HILO_SERVICE_RPC_HILO_SERVICE_H_
#define HILO_SERVICE_RPC_HILO_SERVICE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "hilo/base/clock.h"
#include "hilo/v1/hilo.pb.h"
#include "service/access/collection_limit.h"
#include "service/observe/observer.h"
#include "service/store/range_size_policy.h"
#include "service/store/range_store.h"

namespace hilo {

// Most items one ReturnRanges call may carry.
inline constexpr int kMaxReturnRangesItems = 1000;

// OK, or INVALID_ARGUMENT when a ReturnRanges call carries more than
// kMaxReturnRangesItems items.
absl::Status CheckReturnRangesCount(int items);

// Receives the outcome of a service call.
using ServiceCallback = absl::AnyInvocable<void(absl::Status)>;

class HiLoService {
 public:
  // `store`, `clock` and `observer` (which may be null) must outlive the
  // service. `node_tag` must be valid. With `allow_returns_without_token`
  // a ReturnRange without range_token is judged by Max and the return floor
  // alone (for clients older than tokens; unsafe: such a return can apply
  // twice, or come from a caller that never held the range); without it,
  // such a return is FAILED_PRECONDITION. `collections` (null: no limit;
  // else it must outlive the service) bounds the collections a NextRange
  // may create: past it, a NextRange on a new one is RESOURCE_EXHAUSTED.
  // A last_max more than `max_last_max_jump` above the collection's Max is
  // FAILED_PRECONDITION (the store's guard rail, IsGuardRailRefusal) unless
  // the caller may administer the collection.
  HiLoService(RangeStore* store, RangeSizePolicy policy, std::string node_tag,
              const Clock* clock, Observer* observer = nullptr,
              bool allow_returns_without_token = false,
              CollectionLimit* collections = nullptr,
              int64_t max_last_max_jump = kNoFloorJumpLimit);

  // Fill `response` and then call `done` exactly once with the outcome (an
  // error leaves `response` unspecified). `request` and `response` must
  // stay valid until `done` is called. The observer is told first.
  // `may_administer`: the caller may administer the collection (it could
  // raise the floor anyway), so its last_max is not held to
  // max_last_max_jump.
  // A new collection is charged to `quota` too (CollectionLimit: the
  // identity's own creations of the last minute).
  void NextRange(const hilo::v1::NextRangeRequest& request,
                 hilo::v1::NextRangeResponse* response, bool may_administer,
                 CreationQuota quota, ServiceCallback done);
  void NextRange(const hilo::v1::NextRangeRequest& request,
                 hilo::v1::NextRangeResponse* response, bool may_administer,
                 ServiceCallback done) {
    NextRange(request, response, may_administer, CreationQuota{},
              std::move(done));
  }
  void NextRange(const hilo::v1::NextRangeRequest& request,
                 hilo::v1::NextRangeResponse* response, ServiceCallback done) {
    NextRange(request, response, /*may_administer=*/false, std::move(done));
  }
  void ReturnRange(const hilo::v1::ReturnRangeRequest& request,
                   hilo::v1::ReturnRangeResponse* response,
                   ServiceCallback done);

  // Each item as ReturnRange would judge it, all given to the store in one
  // ReturnManyAsync; response->results gets one result per item. An item
  // whose `refusals` entry (if `refusals` is not empty, one per item) is
  // not OK is refused with it and never reaches the store (the gatekeeper's
  // authorization). The call fails as a whole only with INVALID_ARGUMENT
  // for more than kMaxReturnRangesItems items (CheckReturnRangesCount);
  // nothing is applied then. The observer is told of each item as of a
  // ReturnRange.
  void ReturnRanges(const hilo::v1::ReturnRangesRequest& request,
                    std::vector<absl::Status> refusals,
                    hilo::v1::ReturnRangesResponse* response,
                    ServiceCallback done);

  // The same, waiting for the outcome.
  absl::Status DoNextRange(const hilo::v1::NextRangeRequest& request,
                           hilo::v1::NextRangeResponse* response,
                           bool may_administer = false);
  absl::Status DoReturnRange(const hilo::v1::ReturnRangeRequest& request,
                             hilo::v1::ReturnRangeResponse* response);
  absl::Status DoReturnRanges(const hilo::v1::ReturnRangesRequest& request,
                              hilo::v1::ReturnRangesResponse* response);

 private:
  // One NextRange from its arrival to its reply (hilo_service.cc).
  struct NextRangeCall;

  // Allocates within the collection limit, then answers.
  void AllocateLimited(std::unique_ptr<NextRangeCall> call);
  // Reports the call's outcome to the observer and its caller.
  void FinishNextRange(std::unique_ptr<NextRangeCall> call,
                       absl::Status status);

  RangeStore* const store_;
  const RangeSizePolicy policy_;
  const std::string node_tag_;
  const Clock* const clock_;
  Observer* const observer_;
  const bool allow_returns_without_token_;
  CollectionLimit* const collections_;
  const int64_t max_last_max_jump_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_HILO_SERVICE_H_
