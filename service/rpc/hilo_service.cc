#include "service/rpc/hilo_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "hilo/base/await.h"
#include "hilo/v1/conversions.h"
#include "service/access/collection_limit.h"
#include "service/store/range_token.h"
#include "service/store/validation.h"

namespace hilo {
namespace {

// The checks of NextRange that need no store; OK or INVALID_ARGUMENT.
absl::Status ValidateNext(const hilo::v1::NextRangeRequest& request,
                          std::optional<absl::Time>* last_range_at) {
  if (absl::Status s = ValidateCollectionName(request.collection()); !s.ok()) {
    return s;
  }
  if (request.last_size() < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "last_size is %d; it must not be negative", request.last_size()));
  }
  // Above kMaxFloor, last_max is checked against the row (NextRange).
  if (absl::Status s =
          ValidateFloor("last_max", std::min(request.last_max(), kMaxFloor),
                        request.collection());
      !s.ok()) {
    return s;
  }
  if (request.has_last_range_at()) {
    absl::StatusOr<absl::Time> t =
        FromProtoTime(request.last_range_at(), "last_range_at");
    if (!t.ok()) return t.status();
    *last_range_at = *t;
  }
  return absl::OkStatus();
}

absl::Status ValidateReturn(const hilo::v1::ReturnRangeRequest& request,
                            bool allow_returns_without_token) {
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
  if (request.range_token() == 0 && !allow_returns_without_token) {
    return absl::FailedPreconditionError(
        "ReturnRange carries no range_token; send the range_token NextRange "
        "gave with the range (this server does not take returns without "
        "one: they could apply twice or come from a caller that never held "
        "the range)");
  }
  return absl::OkStatus();
}

}  // namespace

HiLoService::HiLoService(RangeStore* store, RangeSizePolicy policy,
                         std::string node_tag, const Clock* clock,
                         Observer* observer, bool allow_returns_without_token,
                         CollectionLimit* collections,
                         int64_t max_last_max_jump)
    : store_(store),
      policy_(policy),
      node_tag_(std::move(node_tag)),
      clock_(clock),
      observer_(observer),
      allow_returns_without_token_(allow_returns_without_token),
      collections_(collections),
      max_last_max_jump_(max_last_max_jump) {}

// Everything a NextRange carries between its steps, in one allocation: the
// callbacks that pass it on capture `this` and this pointer only, which fits
// in AnyInvocable's own storage, so a call allocates nothing more on its
// way to the store and back.
struct HiLoService::NextRangeCall {
  // Both outlive the call: the RPC's own messages.
  const hilo::v1::NextRangeRequest* request = nullptr;
  hilo::v1::NextRangeResponse* response = nullptr;
  ServiceCallback done;
  absl::Time start;    // for the observer's latency
  absl::Time now;      // the clock's, stamped on the range
  int64_t size = 0;    // the range size the policy chose
  uint64_t token = 0;  // the range's token
  int64_t max_jump = 0;
  CreationQuota quota;
  // The collection limit reserved a row for this call.
  bool reserved = false;
};

void HiLoService::NextRange(const hilo::v1::NextRangeRequest& request,
                            hilo::v1::NextRangeResponse* response,
                            bool may_administer, CreationQuota quota,
                            ServiceCallback done) {
  auto call = std::make_unique<NextRangeCall>();
  call->request = &request;
  call->response = response;
  call->done = std::move(done);
  call->start = absl::Now();
  std::optional<absl::Time> last_range_at;
  if (absl::Status s = ValidateNext(request, &last_range_at); !s.ok()) {
    return FinishNextRange(std::move(call), std::move(s));
  }
  call->now = clock_->Now();
  call->size = policy_.NextSize(request.last_size(), last_range_at, call->now);
  call->token = NewRangeToken();
  call->max_jump = may_administer ? kNoFloorJumpLimit : max_last_max_jump_;
  call->quota = std::move(quota);
  if (request.last_max() <= kMaxFloor) {
    return AllocateLimited(std::move(call));
  }
  // The guard rail: a last_max above kMaxFloor may not raise Max (one
  // request must not push a collection toward INT64_MAX), but the holder
  // of a range already up there (a floor set by an operator, an old row)
  // reports its high and must go on. Max only grows between this read and
  // the allocation, except by a return to at most a number the caller held.
  store_->GetAsync(
      request.collection(),
      [this, call = std::move(call)](
          absl::StatusOr<std::optional<CollectionState>> row) mutable {
        const hilo::v1::NextRangeRequest& request = *call->request;
        if (!row.ok()) return FinishNextRange(std::move(call), row.status());
        if (!row->has_value() || (*row)->max < request.last_max()) {
          absl::Status refused = ValidateFloor("last_max", request.last_max(),
                                               request.collection());
          return FinishNextRange(std::move(call), std::move(refused));
        }
        AllocateLimited(std::move(call));
      });
}

void HiLoService::AllocateLimited(std::unique_ptr<NextRangeCall> call) {
  call->reserved =
      collections_ != nullptr && collections_->TryReserve(&call->quota);
  // Without a reservation only a collection that has a row may go on: the
  // store looks for the row in the allocation's own transaction, so a call
  // on an existing collection pays nothing more when the limit is full
  // (once, it first waited for a read on the store's reading thread).
  const bool may_create = call->reserved || collections_ == nullptr;
  const hilo::v1::NextRangeRequest& request = *call->request;
  const int64_t size = call->size;
  const uint64_t token = call->token;
  const int64_t max_jump = call->max_jump;
  auto settle = [this, call = std::move(call)](
                    absl::StatusOr<Allocation> allocation) mutable {
    if (collections_ != nullptr) {
      collections_->Settle(
          call->reserved, allocation.ok() && allocation->created, &call->quota);
    }
    if (!allocation.ok() && IsNoRowRefusal(allocation.status()) &&
        collections_ != nullptr) {
      absl::Status refused = collections_->RefuseNewCollection(
          call->request->collection(), &call->quota);
      return FinishNextRange(std::move(call), std::move(refused));
    }
    if (allocation.ok()) {
      hilo::v1::NextRangeResponse* response = call->response;
      response->set_low(allocation->range.low);
      response->set_high(allocation->range.high);
      response->set_node_tag(node_tag_);
      response->set_range_token(call->token);
      ToProtoTime(call->now, response->mutable_range_at());
    }
    FinishNextRange(std::move(call), allocation.status());
  };
  if (may_create) {
    store_->AllocateAsync(request.collection(), size, request.last_max(), token,
                          max_jump, std::move(settle));
  } else {
    store_->AllocateExistingAsync(request.collection(), size,
                                  request.last_max(), token, max_jump,
                                  std::move(settle));
  }
}

void HiLoService::FinishNextRange(std::unique_ptr<NextRangeCall> call,
                                  absl::Status status) {
  if (observer_ != nullptr) {
    const hilo::v1::NextRangeResponse& response = *call->response;
    const Range range{response.low(), response.high()};
    observer_->OnNextRange(call->request->collection(), status,
                           status.ok() ? &range : nullptr,
                           absl::Now() - call->start);
  }
  ServiceCallback done = std::move(call->done);
  call.reset();
  done(std::move(status));
}

void HiLoService::ReturnRange(const hilo::v1::ReturnRangeRequest& request,
                              hilo::v1::ReturnRangeResponse* response,
                              ServiceCallback done) {
  const absl::Time start = absl::Now();
  auto finish = [this, &request, response, start,
                 done = std::move(done)](absl::Status status) mutable {
    if (observer_ != nullptr) {
      const ReturnOutcome outcome{response->applied(), response->max()};
      observer_->OnReturnRange(request.collection(), status,
                               status.ok() ? &outcome : nullptr,
                               absl::Now() - start);
    }
    done(std::move(status));
  };
  if (absl::Status s = ValidateReturn(request, allow_returns_without_token_);
      !s.ok()) {
    finish(std::move(s));
    return;
  }
  if (!request.node_tag().empty() && request.node_tag() != node_tag_) {
    // Another node's range: its numbers are not ours to take back.
    store_->GetAsync(
        request.collection(),
        [response, finish = std::move(finish)](
            absl::StatusOr<std::optional<CollectionState>> state) mutable {
          if (state.ok()) {
            response->set_applied(false);
            response->set_max(state->has_value() ? (*state)->max : 0);
          }
          finish(state.status());
        });
    return;
  }
  store_->ReturnAsync(request.collection(), request.end(), request.last(),
                      request.range_token(),
                      [response, finish = std::move(finish)](
                          absl::StatusOr<ReturnOutcome> outcome) mutable {
                        if (outcome.ok()) {
                          response->set_applied(outcome->applied);
                          response->set_max(outcome->max);
                        }
                        finish(outcome.status());
                      });
}

absl::Status CheckReturnRangesCount(int items) {
  if (items > kMaxReturnRangesItems) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ReturnRanges carries %d items; the limit is %d", items,
                        kMaxReturnRangesItems));
  }
  return absl::OkStatus();
}

void HiLoService::ReturnRanges(const hilo::v1::ReturnRangesRequest& request,
                               std::vector<absl::Status> refusals,
                               hilo::v1::ReturnRangesResponse* response,
                               ServiceCallback done) {
  const absl::Time start = absl::Now();
  const int n = request.returns_size();
  if (absl::Status s = CheckReturnRangesCount(n); !s.ok()) {
    return done(std::move(s));
  }
  // Each item's status before the store: refused by the gatekeeper, or by
  // the checks of ReturnRange; OK ones go to the store, in order.
  std::vector<absl::Status> statuses(n);
  std::vector<ReturnItem> items;
  std::vector<int> index;  // of each store item in the request
  items.reserve(n);
  index.reserve(n);
  for (int i = 0; i < n; ++i) {
    const hilo::v1::ReturnRangeRequest& r = request.returns(i);
    if (static_cast<size_t>(i) < refusals.size() && !refusals[i].ok()) {
      statuses[i] = std::move(refusals[i]);
      continue;
    }
    statuses[i] = ValidateReturn(r, allow_returns_without_token_);
    if (!statuses[i].ok()) continue;
    ReturnItem item;
    item.collection = r.collection();
    item.end = r.end();
    item.last = r.last();
    item.token = r.range_token();
    // Another node's range: its numbers are not ours to take back.
    item.foreign = !r.node_tag().empty() && r.node_tag() != node_tag_;
    items.push_back(std::move(item));
    index.push_back(i);
  }
  store_->ReturnManyAsync(
      std::move(items),
      [this, &request, response, start, statuses = std::move(statuses),
       index = std::move(index), done = std::move(done)](
          absl::StatusOr<std::vector<absl::StatusOr<ReturnOutcome>>>
              outcomes) mutable {
        std::vector<ReturnOutcome> judged(statuses.size());
        for (size_t k = 0; k < index.size(); ++k) {
          absl::Status& status = statuses[index[k]];
          if (!outcomes.ok()) {
            status = outcomes.status();
          } else if (k >= outcomes->size()) {
            status = absl::InternalError("the store judged too few returns");
          } else if (!(*outcomes)[k].ok()) {
            status = (*outcomes)[k].status();
          } else {
            judged[index[k]] = *(*outcomes)[k];
          }
        }
        const absl::Duration elapsed = absl::Now() - start;
        response->clear_results();
        for (size_t i = 0; i < statuses.size(); ++i) {
          hilo::v1::ReturnRangeResult* result = response->add_results();
          if (statuses[i].ok()) {
            result->set_applied(judged[i].applied);
            result->set_max(judged[i].max);
          } else {
            result->set_code(static_cast<int>(statuses[i].code()));
            result->set_message(std::string(statuses[i].message()));
          }
          if (observer_ != nullptr) {
            observer_->OnReturnRange(
                request.returns(i).collection(), statuses[i],
                statuses[i].ok() ? &judged[i] : nullptr, elapsed);
          }
        }
        done(absl::OkStatus());
      });
}

absl::Status HiLoService::DoNextRange(const hilo::v1::NextRangeRequest& request,
                                      hilo::v1::NextRangeResponse* response,
                                      bool may_administer) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    NextRange(request, response, may_administer, std::move(done));
  });
}

absl::Status HiLoService::DoReturnRange(
    const hilo::v1::ReturnRangeRequest& request,
    hilo::v1::ReturnRangeResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    ReturnRange(request, response, std::move(done));
  });
}

absl::Status HiLoService::DoReturnRanges(
    const hilo::v1::ReturnRangesRequest& request,
    hilo::v1::ReturnRangesResponse* response) {
  return base::Await<absl::Status>([&](ServiceCallback done) {
    ReturnRanges(request, {}, response, std::move(done));
  });
}

}  // namespace hilo
