#include "service/collection_limit.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace hilo {

CollectionLimit::CollectionLimit(int64_t max, int64_t existing)
    : max_(max), count_(existing) {}

bool CollectionLimit::TryReserve() {
  base::MutexLock lock(&mu_);
  if (max_ > 0 && count_ + reserved_ >= max_) return false;
  ++reserved_;
  return true;
}

void CollectionLimit::Release(bool created) {
  base::MutexLock lock(&mu_);
  --reserved_;
  if (created) ++count_;
}

void CollectionLimit::Deleted() {
  base::MutexLock lock(&mu_);
  if (count_ > 0) --count_;
}

int64_t CollectionLimit::count() const {
  base::MutexLock lock(&mu_);
  return count_;
}

absl::Status CollectionLimit::RefuseNewCollection(
    absl::string_view collection) const {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "collection \"%s\" would be new, and this node already stores its "
      "limit of %d collections (--max_collections); existing collections "
      "keep working",
      collection, max_));
}

absl::StatusOr<int64_t> CountCollections(RangeStore* store) {
  constexpr int kPage = 1000;
  int64_t count = 0;
  std::string after;
  for (;;) {
    absl::StatusOr<std::vector<NamedCollectionState>> page =
        store->List(after, kPage);
    if (!page.ok()) return page.status();
    count += static_cast<int64_t>(page->size());
    if (static_cast<int>(page->size()) < kPage) return count;
    after = page->back().name;
  }
}

}  // namespace hilo
