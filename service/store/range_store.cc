#include "service/store/range_store.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"
#include "hilo/base/await.h"
#include "service/store/store_arguments.h"

namespace hilo {
namespace {

// Marks NoRowRefusal's status.
constexpr char kNoRowPayload[] = "type.googleapis.com/hilo.internal.NoRow";
// Marks StoreFullRefusal's status.
constexpr char kStoreFullPayload[] =
    "type.googleapis.com/hilo.internal.StoreFull";

template <typename T, typename Start>
absl::StatusOr<T> Wait(Start start) {
  return base::Await<absl::StatusOr<T>>(start);
}

}  // namespace

void RangeStore::AllocateAsync(absl::string_view collection, int64_t size,
                               int64_t floor, uint64_t token,
                               int64_t max_floor_jump,
                               StoreCallback<Allocation> done) {
  if (absl::Status s =
          CheckAllocateArguments(size, floor, token, max_floor_jump);
      !s.ok()) {
    return done(std::move(s));
  }
  DoAllocateAsync(collection, size, floor, token, max_floor_jump,
                  /*may_create=*/true, std::move(done));
}

void RangeStore::AllocateExistingAsync(absl::string_view collection,
                                       int64_t size, int64_t floor,
                                       uint64_t token, int64_t max_floor_jump,
                                       StoreCallback<Allocation> done) {
  if (absl::Status s =
          CheckAllocateArguments(size, floor, token, max_floor_jump);
      !s.ok()) {
    return done(std::move(s));
  }
  DoAllocateAsync(collection, size, floor, token, max_floor_jump,
                  /*may_create=*/false, std::move(done));
}

absl::Status NoRowRefusal(absl::string_view collection) {
  absl::Status s = absl::NotFoundError(absl::StrFormat(
      "collection \"%s\" has no row, and this call may not create one",
      collection));
  s.SetPayload(kNoRowPayload, absl::Cord("1"));
  return s;
}

bool IsNoRowRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound &&
         status.GetPayload(kNoRowPayload).has_value();
}

absl::Status StoreFullRefusal(absl::string_view collection, int64_t max) {
  absl::Status s = absl::ResourceExhaustedError(absl::StrFormat(
      "collection \"%s\" would be new, and the store already holds its "
      "limit of %d collections (--max_collections, counted over every "
      "server sharing the store); existing collections keep working",
      collection, max));
  s.SetPayload(kStoreFullPayload, absl::Cord("1"));
  return s;
}

bool IsStoreFullRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.GetPayload(kStoreFullPayload).has_value();
}

void RangeStore::ReturnAsync(absl::string_view collection, int64_t end,
                             int64_t last, uint64_t token,
                             StoreCallback<ReturnOutcome> done) {
  if (absl::Status s = CheckReturnArguments(end, last); !s.ok()) {
    return done(std::move(s));
  }
  DoReturnAsync(collection, end, last, token, std::move(done));
}

void RangeStore::ListAsync(
    absl::string_view after, int limit,
    StoreCallback<std::vector<NamedCollectionState>> done) {
  if (absl::Status s = CheckListLimit(limit); !s.ok()) {
    return done(std::move(s));
  }
  DoListAsync(after, limit, std::move(done));
}

void RangeStore::SetFloorAsync(absl::string_view collection, int64_t floor,
                               StoreCallback<FloorOutcome> done) {
  if (absl::Status s = CheckFloorArgument(floor); !s.ok()) {
    return done(std::move(s));
  }
  DoSetFloorAsync(collection, floor, std::move(done));
}

absl::StatusOr<Range> RangeStore::Allocate(absl::string_view collection,
                                           int64_t size, int64_t floor,
                                           uint64_t token,
                                           int64_t max_floor_jump) {
  absl::StatusOr<Allocation> allocation =
      Wait<Allocation>([&](StoreCallback<Allocation> done) {
        AllocateAsync(collection, size, floor, token, max_floor_jump,
                      std::move(done));
      });
  if (!allocation.ok()) return allocation.status();
  return allocation->range;
}

absl::StatusOr<ReturnOutcome> RangeStore::Return(absl::string_view collection,
                                                 int64_t end, int64_t last,
                                                 uint64_t token) {
  return Wait<ReturnOutcome>([&](StoreCallback<ReturnOutcome> done) {
    ReturnAsync(collection, end, last, token, std::move(done));
  });
}

void RangeStore::ReturnManyAsync(
    std::vector<ReturnItem> items,
    StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) {
  using Outcomes = std::vector<absl::StatusOr<ReturnOutcome>>;
  if (items.empty()) return done(Outcomes());
  // Shared by the items' completions; the last one to finish reports.
  struct Join {
    explicit Join(size_t n, StoreCallback<Outcomes> done)
        : outcomes(n, absl::UnknownError("not judged")),
          left(n),
          done(std::move(done)) {}
    Outcomes outcomes;
    std::atomic<size_t> left;
    StoreCallback<Outcomes> done;
  };
  auto join = std::make_shared<Join>(items.size(), std::move(done));
  for (size_t i = 0; i < items.size(); ++i) {
    auto finish = [join, i](absl::StatusOr<ReturnOutcome> outcome) {
      join->outcomes[i] = std::move(outcome);
      if (join->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        join->done(std::move(join->outcomes));
      }
    };
    const ReturnItem& item = items[i];
    if (item.foreign) {
      GetAsync(
          item.collection,
          [finish](absl::StatusOr<std::optional<CollectionState>> row) {
            if (!row.ok()) return finish(row.status());
            finish(ReturnOutcome{false, row->has_value() ? (*row)->max : 0});
          });
    } else {
      ReturnAsync(item.collection, item.end, item.last, item.token,
                  std::move(finish));
    }
  }
}

absl::StatusOr<std::optional<CollectionState>> RangeStore::Get(
    absl::string_view collection) {
  return Wait<std::optional<CollectionState>>(
      [&](StoreCallback<std::optional<CollectionState>> done) {
        GetAsync(collection, std::move(done));
      });
}

absl::StatusOr<std::vector<NamedCollectionState>> RangeStore::List(
    absl::string_view after, int limit) {
  return Wait<std::vector<NamedCollectionState>>(
      [&](StoreCallback<std::vector<NamedCollectionState>> done) {
        ListAsync(after, limit, std::move(done));
      });
}

absl::StatusOr<FloorOutcome> RangeStore::SetFloor(absl::string_view collection,
                                                  int64_t floor) {
  return Wait<FloorOutcome>([&](StoreCallback<FloorOutcome> done) {
    SetFloorAsync(collection, floor, std::move(done));
  });
}

absl::StatusOr<CollectionState> RangeStore::Delete(
    absl::string_view collection) {
  return Wait<CollectionState>([&](StoreCallback<CollectionState> done) {
    DeleteAsync(collection, std::move(done));
  });
}

absl::StatusOr<CollectionState> RangeStore::Retire(
    absl::string_view collection) {
  return Wait<CollectionState>([&](StoreCallback<CollectionState> done) {
    RetireAsync(collection, std::move(done));
  });
}

}  // namespace hilo
