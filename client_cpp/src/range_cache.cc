#include "client_cpp/src/range_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace hilo::internal {
namespace {

uint64_t PackTag(absl::string_view tag) {
  uint64_t packed = 0;
  std::memcpy(&packed, tag.data(), std::min(tag.size(), sizeof(packed)));
  return packed;
}

std::string UnpackTag(uint64_t packed) {
  char bytes[sizeof(packed)];
  std::memcpy(bytes, &packed, sizeof(packed));
  return std::string(bytes, strnlen(bytes, sizeof(bytes)));
}

}  // namespace

RangeCache::RangeCache(std::string collection, RangeSource* source,
                       std::function<void(absl::string_view)> log)
    : collection_(std::move(collection)),
      source_(source),
      log_(std::move(log)) {}

absl::StatusOr<Id> RangeCache::Next() {
  while (true) {
    Id id;
    uint64_t gen;
    if (TryNext(&id, &gen)) return id;
    if (absl::Status s = Refill(gen); !s.ok()) return s;
  }
}

bool RangeCache::TryNext(Id* id, uint64_t* gen) {
  const uint64_t state = state_.fetch_add(1, std::memory_order_acquire);
  *gen = state >> kOffsetBits;
  const int64_t offset = static_cast<int64_t>(state & kOffsetMask);
  const Slot& slot = slots_[*gen % kSlots];
  const uint64_t seq_before = slot.seq.load(std::memory_order_acquire);
  const uint64_t slot_gen = slot.gen.load(std::memory_order_relaxed);
  const int64_t low = slot.low.load(std::memory_order_relaxed);
  const int64_t size = slot.size.load(std::memory_order_relaxed);
  const uint64_t tag = slot.tag.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t seq_after = slot.seq.load(std::memory_order_relaxed);
  if ((seq_before & 1) != 0 || seq_before != seq_after || slot_gen != *gen ||
      offset >= size) {
    return false;
  }
  id->number = low + offset;
  id->node_tag = UnpackTag(tag);
  return true;
}

int64_t RangeCache::Publish(int64_t low, int64_t size, uint64_t tag) {
  const uint64_t next = gen_ + 1;
  Slot& slot = slots_[next % kSlots];
  const uint64_t seq = slot.seq.load(std::memory_order_relaxed);
  slot.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.gen.store(next, std::memory_order_relaxed);
  slot.low.store(low, std::memory_order_relaxed);
  slot.size.store(size, std::memory_order_relaxed);
  slot.tag.store(tag, std::memory_order_relaxed);
  slot.seq.store(seq + 2, std::memory_order_release);
  const uint64_t old =
      state_.exchange(next << kOffsetBits, std::memory_order_acq_rel);
  gen_ = next;
  const int64_t taken = static_cast<int64_t>(old & kOffsetMask);
  return has_range_ ? std::min(taken, range_usable_) : 0;
}

absl::Status RangeCache::Refill(uint64_t gen) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (gen_ != gen) return absl::OkStatus();  // a newer range is out
    if (!fetching_) break;
    const uint64_t fetches = fetches_;
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return gen_ != gen || fetches_ != fetches;
    };
    mu_.Await(absl::Condition(&settled));
    if (gen_ == gen && !fetch_error_.ok()) return fetch_error_;
  }

  // This caller fetches; callers arriving meanwhile wait above.
  fetching_ = true;
  const PreviousRange previous = previous_;
  mu_.Unlock();
  absl::StatusOr<IssuedRange> range = source_->Next(collection_, previous);
  mu_.Lock();
  fetching_ = false;
  ++fetches_;
  if (!range.ok()) {
    fetch_error_ = range.status();
    // Failed callers keep bumping the offset; start it over long before it
    // could carry into the generation bits.
    if ((state_.load(std::memory_order_relaxed) & kOffsetMask) >
        kOffsetMask / 2) {
      Publish(0, 0, 0);
      has_range_ = false;
    }
    return fetch_error_;
  }
  fetch_error_ = absl::OkStatus();
  const int64_t size = range->high - range->low + 1;
  const int64_t usable = std::min(size, kMaxUsableSize);
  Publish(range->low, usable, PackTag(range->node_tag));
  has_range_ = true;
  range_ = *range;
  range_usable_ = usable;
  previous_ = PreviousRange{size, range->range_at, range->high};
  return absl::OkStatus();
}

void RangeCache::ReturnUnused() {
  absl::MutexLock lock(&mu_);
  auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !fetching_; };
  mu_.Await(absl::Condition(&idle));
  if (!has_range_) return;
  const IssuedRange range = range_;
  // Retire the range first: from here on no caller can take its numbers.
  const int64_t taken = Publish(0, 0, 0);
  has_range_ = false;
  if (taken >= range.high - range.low + 1) return;  // nothing left
  const int64_t last = range.low + taken - 1;

  fetching_ = true;
  mu_.Unlock();
  absl::StatusOr<ReturnResult> result =
      source_->Return(collection_, range, last);
  mu_.Lock();
  fetching_ = false;
  ++fetches_;
  fetch_error_ = absl::OkStatus();
  if (!result.ok()) {
    log_(absl::StrFormat(
        "hilo: returning numbers %d-%d of collection \"%s\" failed: %s",
        last + 1, range.high, collection_, result.status().ToString()));
    return;
  }
  if (result->applied) {
    // Our next range may start right after the numbers we used.
    previous_.max = last;
  }
}

}  // namespace hilo::internal
