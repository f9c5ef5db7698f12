#include "service/access/collection_limit.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"
#include "service/access/monotonic_clock.h"

namespace hilo {
namespace {

// Carries CollectionRefusalReason's answer.
constexpr char kRefusalPayload[] =
    "type.googleapis.com/hilo.internal.CollectionRefusal";

absl::Status Refusal(absl::string_view reason, std::string message) {
  absl::Status refusal = absl::ResourceExhaustedError(message);
  refusal.SetPayload(kRefusalPayload, absl::Cord(reason));
  return refusal;
}

}  // namespace

CollectionLimit::CollectionLimit(int64_t max, int64_t existing,
                                 int64_t max_creations_per_minute,
                                 const Clock* clock)
    : max_(max),
      max_per_minute_(max_creations_per_minute),
      clock_(clock != nullptr ? clock : MonotonicClock::Get()),
      count_(existing) {}

void CollectionLimit::Expire(absl::Time now) const {
  while (!created_at_.empty() &&
         created_at_.front() + absl::Minutes(1) <= now) {
    created_at_.pop_front();
  }
}

bool CollectionLimit::TryReserve() {
  const absl::Time now = clock_->Now();
  base::MutexLock lock(&mu_);
  if (max_ > 0 && count_ + reserved_ >= max_) return false;
  if (max_per_minute_ > 0) {
    Expire(now);
    if (static_cast<int64_t>(created_at_.size()) + reserved_ >=
        max_per_minute_) {
      return false;
    }
  }
  ++reserved_;
  return true;
}

void CollectionLimit::Settle(bool reserved, bool created) {
  const absl::Time now = clock_->Now();
  base::MutexLock lock(&mu_);
  if (reserved) --reserved_;
  if (!created) return;
  ++count_;
  if (max_per_minute_ > 0) created_at_.push_back(now);
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
  const absl::Time now = clock_->Now();
  base::MutexLock lock(&mu_);
  if (max_per_minute_ == 0 || (max_ > 0 && count_ + reserved_ >= max_)) {
    return Refusal(
        kRefusedForCount,
        absl::StrFormat(
            "collection \"%s\" would be new, and this node already stores "
            "its limit of %d collections (--max_collections); existing "
            "collections keep working",
            collection, max_));
  }
  Expire(now);
  // When the oldest creation leaves the window; calls in flight may have
  // filled it instead, and they end within a second.
  absl::Duration wait = absl::Seconds(1);
  if (static_cast<int64_t>(created_at_.size()) >= max_per_minute_ &&
      !created_at_.empty()) {
    wait = created_at_.front() + absl::Minutes(1) - now;
  }
  return Refusal(
      kRefusedForRate,
      absl::StrFormat(
          "collection \"%s\" would be new, and this node already created "
          "its limit of %d collections in the last minute "
          "(--max_collection_creations_per_minute); retry in %s; existing "
          "collections keep working",
          collection, max_per_minute_,
          absl::FormatDuration(absl::Ceil(wait, absl::Milliseconds(1)))));
}

absl::string_view CollectionRefusalReason(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return "";
  const auto reason = status.GetPayload(kRefusalPayload);
  if (!reason.has_value()) return "";
  if (*reason == kRefusedForCount) return kRefusedForCount;
  if (*reason == kRefusedForRate) return kRefusedForRate;
  return "";
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
