#include "service/access/collection_limit.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"
#include "hilo/base/monotonic_clock.h"

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

CollectionLimit::IdentityWindow* CollectionLimit::Window(
    const CreationQuota* quota, absl::Time now) const {
  if (quota == nullptr || quota->per_minute <= 0) return nullptr;
  IdentityWindow* window = &identities_[quota->identity];
  while (!window->created_at.empty() &&
         window->created_at.front() + absl::Minutes(1) <= now) {
    window->created_at.pop_front();
  }
  return window;
}

void CollectionLimit::Forget(const CreationQuota& quota) const {
  auto it = identities_.find(quota.identity);
  if (it != identities_.end() && it->second.created_at.empty() &&
      it->second.reserved == 0) {
    identities_.erase(it);
  }
}

bool CollectionLimit::TryReserve(const CreationQuota* quota) {
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
  if (IdentityWindow* window = Window(quota, now)) {
    if (static_cast<int64_t>(window->created_at.size()) + window->reserved >=
        quota->per_minute) {
      Forget(*quota);
      return false;
    }
    ++window->reserved;
  }
  ++reserved_;
  return true;
}

void CollectionLimit::Settle(bool reserved, bool created,
                             const CreationQuota* quota) {
  const absl::Time now = clock_->Now();
  base::MutexLock lock(&mu_);
  IdentityWindow* window = Window(quota, now);
  if (reserved) {
    --reserved_;
    if (window != nullptr && window->reserved > 0) --window->reserved;
  }
  if (created) {
    ++count_;
    if (max_per_minute_ > 0) created_at_.push_back(now);
    if (window != nullptr) window->created_at.push_back(now);
  }
  if (window != nullptr) Forget(*quota);
}

void CollectionLimit::Deleted() {
  base::MutexLock lock(&mu_);
  if (count_ > 0) --count_;
}

int64_t CollectionLimit::identities_tracked() const {
  base::MutexLock lock(&mu_);
  return static_cast<int64_t>(identities_.size());
}

int64_t CollectionLimit::count() const {
  base::MutexLock lock(&mu_);
  return count_;
}

absl::Status CollectionLimit::RefuseNewCollection(
    absl::string_view collection, const CreationQuota* quota) const {
  const absl::Time now = clock_->Now();
  base::MutexLock lock(&mu_);
  if ((max_per_minute_ == 0 && (quota == nullptr || quota->per_minute <= 0)) ||
      (max_ > 0 && count_ + reserved_ >= max_)) {
    return Refusal(
        kRefusedForCount,
        absl::StrFormat(
            "collection \"%s\" would be new, and this node already stores "
            "its limit of %d collections (--max_collections); existing "
            "collections keep working",
            collection, max_));
  }
  // When the oldest creation of a full window leaves it; calls in flight
  // may have filled it instead, and they end within a second.
  auto retry = [now](const std::deque<absl::Time>& created_at, int64_t limit) {
    absl::Duration wait = absl::Seconds(1);
    if (static_cast<int64_t>(created_at.size()) >= limit &&
        !created_at.empty()) {
      wait = created_at.front() + absl::Minutes(1) - now;
    }
    return absl::FormatDuration(absl::Ceil(wait, absl::Milliseconds(1)));
  };
  if (const IdentityWindow* window = Window(quota, now);
      window != nullptr &&
      static_cast<int64_t>(window->created_at.size()) + window->reserved >=
          quota->per_minute) {
    std::string message = absl::StrFormat(
        "collection \"%s\" would be new, and %s already created its limit "
        "of %d collections in the last minute (collection_creations_per_"
        "minute in the authorization policy); retry in %s; existing "
        "collections keep working",
        collection, quota->identity, quota->per_minute,
        retry(window->created_at, quota->per_minute));
    Forget(*quota);
    return Refusal(kRefusedForIdentityRate, std::move(message));
  }
  if (quota != nullptr) Forget(*quota);
  if (max_per_minute_ == 0) {
    // Only calls in flight filled the identity's window, now settled.
    return Refusal(
        kRefusedForIdentityRate,
        absl::StrFormat("collection \"%s\" would be new, and calls of %s in "
                        "flight hold its creation budget; retry in 1s",
                        collection, quota->identity));
  }
  Expire(now);
  return Refusal(
      kRefusedForRate,
      absl::StrFormat(
          "collection \"%s\" would be new, and this node already created "
          "its limit of %d collections in the last minute "
          "(--max_collection_creations_per_minute); retry in %s; existing "
          "collections keep working",
          collection, max_per_minute_, retry(created_at_, max_per_minute_)));
}

absl::string_view CollectionRefusalReason(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return "";
  if (IsStoreFullRefusal(status)) return kRefusedForCount;
  const auto reason = status.GetPayload(kRefusalPayload);
  if (!reason.has_value()) return "";
  if (*reason == kRefusedForCount) return kRefusedForCount;
  if (*reason == kRefusedForRate) return kRefusedForRate;
  if (*reason == kRefusedForIdentityRate) return kRefusedForIdentityRate;
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
