#include "service/range_store.h"

#include <utility>

#include "hilo/base/await.h"

namespace hilo {
namespace {

template <typename T, typename Start>
absl::StatusOr<T> Wait(Start start) {
  return base::Await<absl::StatusOr<T>>(start);
}

}  // namespace

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

}  // namespace hilo
