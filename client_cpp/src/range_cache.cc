#include "client_cpp/src/range_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace hilo::internal {
namespace {

// A valid tag (IsValidNodeTag) fits in a suffix whole.
static_assert(kMaxNodeTagSize == NodeTag::kMaxSize);

}  // namespace

RangeCache::RangeCache(std::string collection, RangeSource* source,
                       std::function<void(absl::string_view)> log,
                       double prefetch_at,
                       std::function<void(std::function<void()>)> schedule,
                       const MonotonicClock* clock)
    : collection_(std::move(collection)),
      source_(source),
      log_(std::move(log)),
      prefetch_at_(schedule != nullptr ? prefetch_at : 0),
      schedule_(std::move(schedule)),
      clock_(clock) {}

absl::StatusOr<Id> RangeCache::NextAfterRefill(uint64_t gen) {
  Taken taken;
  if (absl::Status s = TakeAfterRefill(gen, &taken); !s.ok()) return s;
  return Id{taken.number, taken.suffix.tag()};
}

absl::Status RangeCache::TakeAfterRefill(uint64_t gen, Taken* taken) {
  while (true) {
    if (absl::Status s = Refill(gen); !s.ok()) return s;
    if (TryTake(taken, &gen)) return absl::OkStatus();
  }
}

void RangeCache::AddStatsTo(ClientStats* stats) {
  stats->calls_waited += waits_.load(std::memory_order_relaxed);
  stats->ranges_fetched += fetched_.load(std::memory_order_relaxed);
  stats->ranges_prefetched += prefetched_.load(std::memory_order_relaxed);
  stats->returns_applied += returns_applied_.load(std::memory_order_relaxed);
  stats->returns_refused += returns_refused_.load(std::memory_order_relaxed);
  stats->returns_failed += returns_failed_.load(std::memory_order_relaxed);
  for (int code = 0; code < kStatusCodes; ++code) {
    const int64_t n = errors_[code].load(std::memory_order_relaxed);
    if (n != 0) stats->errors[static_cast<absl::StatusCode>(code)] += n;
  }
  base::MutexLock lock(&mu_);
  if (!has_range_) return;
  const uint64_t state = state_.load(std::memory_order_relaxed);
  const int64_t taken =
      (state >> kOffsetBits) == gen_
          ? std::min(static_cast<int64_t>(state & kOffsetMask), range_usable_)
          : range_usable_;
  int64_t held = range_usable_ - taken;
  if (has_next_) held += std::min(next_.high - next_.low + 1, kMaxUsableSize);
  const int64_t handed_out = window_taken_before_ + taken;
  const absl::Duration window = TimeLeft(window_start_, clock_->Now());
  if (handed_out <= 0 || window <= absl::ZeroDuration()) return;
  stats->runway[collection_] =
      window * (static_cast<double>(held) / static_cast<double>(handed_out));
}

void RangeCache::CountError(const absl::Status& status) {
  int code = static_cast<int>(status.code());
  if (code <= 0 || code >= kStatusCodes) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  errors_[code].fetch_add(1, std::memory_order_relaxed);
}

void RangeCache::SchedulePrefetch() {
  schedule_([this] { Prefetch(); });
}

int64_t RangeCache::Publish(const IssuedRange* range) {
  int64_t low = 0, size = 0, prefetch_offset = -1;
  uint64_t suffix = 0;
  if (range != nullptr) {
    low = range->low;
    size = std::min(range->high - range->low + 1, kMaxUsableSize);
    suffix = IdSuffix(range->node_tag).word();
    if (prefetch_at_ > 0) {
      prefetch_offset = std::max<int64_t>(
          0, static_cast<int64_t>(std::ceil(prefetch_at_ * size)) - 1);
    }
  }
  const uint64_t next = (gen_ + 1) & kGenerationMask;
  Slot& slot = slots_[next % kSlots];
  const uint64_t seq = slot.seq.load(std::memory_order_relaxed);
  slot.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.gen.store(next, std::memory_order_relaxed);
  slot.low.store(low, std::memory_order_relaxed);
  slot.size.store(size, std::memory_order_relaxed);
  slot.suffix.store(suffix, std::memory_order_relaxed);
  slot.prefetch_offset.store(prefetch_offset, std::memory_order_relaxed);
  slot.seq.store(seq + 2, std::memory_order_release);
  const uint64_t old =
      state_.exchange(next << kOffsetBits, std::memory_order_acq_rel);
  gen_ = next;
  const int64_t taken =
      has_range_
          ? std::min(static_cast<int64_t>(old & kOffsetMask), range_usable_)
          : 0;
  if (taken > 0) {
    int64_t& used = used_[range_.node_tag];
    used = std::max(used, range_.low + taken - 1);
  }
  const bool had_range = has_range_;
  has_range_ = range != nullptr;
  if (has_range_) {
    const MonotonicClock::TimePoint now = clock_->Now();
    // After a retirement (nullptr) the window starts afresh.
    window_start_ = had_range ? published_at_ : now;
    window_taken_before_ = had_range ? taken : 0;
    published_at_ = now;
    range_ = *range;
    range_usable_ = size;
  }
  return taken;
}

absl::Status RangeCache::Refill(uint64_t gen) {
  base::MutexLock lock(&mu_);
  bool waited = false;
  while (true) {
    if (gen_ != gen) break;  // a newer range is out
    if (has_next_) {
      // The prefetched range takes over without a round trip.
      has_next_ = false;
      Publish(&next_);
      break;
    }
    if (!fetching_) {
      // This caller fetches; callers arriving meanwhile wait below.
      waited = true;
      absl::StatusOr<IssuedRange> range = Fetch();
      if (!range.ok()) {
        fetch_error_ = range.status();
        // Failed callers keep bumping the offset; start it over long
        // before it could carry into the generation bits.
        if ((state_.load(std::memory_order_relaxed) & kOffsetMask) >
            kOffsetMask / 2) {
          Publish(nullptr);
        }
        waits_.fetch_add(1, std::memory_order_relaxed);
        return fetch_error_;
      }
      fetch_error_ = absl::OkStatus();
      Publish(&*range);
      break;
    }
    // Another caller (or the prefetcher) is fetching: wait for it.
    waited = true;
    const uint64_t fetches = fetches_;
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return gen_ != gen || fetches_ != fetches;
    };
    mu_.Await(settled);
    if (gen_ == gen && !has_next_ && !fetch_error_.ok()) {
      waits_.fetch_add(1, std::memory_order_relaxed);
      return fetch_error_;
    }
  }
  if (waited) waits_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<IssuedRange> RangeCache::Fetch() {
  fetching_ = true;
  const PreviousRange previous = previous_;
  mu_.Unlock();
  absl::StatusOr<IssuedRange> range = source_->Next(collection_, previous);
  mu_.Lock();
  fetching_ = false;
  ++fetches_;
  if (!range.ok()) {
    CountError(range.status());
    return range;
  }
  // The server has moved past this range whatever we do with it.
  previous_.size = range->high - range->low + 1;
  previous_.range_at = range->range_at;
  previous_.max = range->high;
  if (!IsValidNodeTag(range->node_tag)) {
    // The packed tag holds only a valid one; never hand out a number with
    // a tag other than its range's.
    absl::Status bad = absl::InternalError(absl::StrFormat(
        "%s: range %d-%d of \"%s\" came with node tag \"%s\", which is not "
        "1-%d characters of A-Z and 0-9",
        source_->Describe(), range->low, range->high, collection_,
        absl::CHexEscape(range->node_tag), kMaxNodeTagSize));
    CountError(bad);
    return bad;
  }
  // Ours now: that node's next range must not overlap it.
  previous_.held.Add(range->node_tag, range->low, range->high);
  fetched_.fetch_add(1, std::memory_order_relaxed);
  return range;
}

void RangeCache::LockForFork() { mu_.Lock(); }

void RangeCache::UnlockAfterFork() { mu_.Unlock(); }

void RangeCache::DropAfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  has_next_ = false;
  Publish(nullptr);
  fetching_ = false;
  ++fetches_;
  fetch_error_ = absl::OkStatus();
  // Its waiters were the parent's threads; unlocking could hand it to one.
  new (&mu_) base::Mutex();
}

void RangeCache::StartAtGenerationForTesting(uint64_t gen) {
  base::MutexLock lock(&mu_);
  gen_ = gen & kGenerationMask;
  state_.store(gen_ << kOffsetBits, std::memory_order_relaxed);
}

void RangeCache::Prefetch() {
  base::MutexLock lock(&mu_);
  if (fetching_ || has_next_ || !has_range_) return;
  absl::StatusOr<IssuedRange> range = Fetch();
  if (!range.ok()) {
    // Not worth a caller's error: the next refill fetches (and reports)
    // by itself.
    fetch_error_ = absl::OkStatus();
    return;
  }
  fetch_error_ = absl::OkStatus();
  next_ = *range;
  has_next_ = true;
  prefetched_.fetch_add(1, std::memory_order_relaxed);
}

void RangeCache::ReturnUnused() {
  const UnusedRanges unused = TakeUnused();
  std::vector<ReturnRequest> requests;
  AppendRequests(unused, &requests);
  if (!requests.empty()) RecordReturns(unused, source_->ReturnMany(requests));
  EndReturn(unused);
}

RangeCache::UnusedRanges RangeCache::TakeUnused() {
  base::MutexLock lock(&mu_);
  auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !fetching_; };
  mu_.Await(idle);
  // Newest first: the server takes back only the range it issued last. The
  // prefetched range goes back whole (last = low - 1); if it was issued by
  // the same node right above the current range, that makes the current
  // range the last issued again, with its token: then its tail can come
  // back too. Ranges of different nodes go back each on its own.
  UnusedRanges unused;
  if (has_next_) {
    unused.returns.emplace_back(next_, next_.low - 1);
    unused.pair = has_range_ && next_.source == range_.source &&
                  next_.low == range_.high + 1;
    has_next_ = false;
  }
  if (has_range_) {
    const IssuedRange range = range_;
    // Retire the range first: from here on no caller can take its numbers.
    const int64_t taken = Publish(nullptr);
    const int64_t used_up_to = range.low + taken - 1;
    if (taken < range.high - range.low + 1) {
      unused.returns.emplace_back(range, used_up_to);
    }
  }
  if (unused.returns.size() < 2) unused.pair = false;
  // Callers wait (as for a fetch) until EndReturn.
  if (!unused.returns.empty()) fetching_ = true;
  return unused;
}

bool RangeCache::RecordReturn(const IssuedRange& range, int64_t last,
                              const absl::StatusOr<ReturnResult>& result) {
  if (!result.ok()) {
    returns_failed_.fetch_add(1, std::memory_order_relaxed);
    CountError(result.status());
    log_(absl::StrFormat(
        "hilo: returning numbers %d-%d of collection \"%s\" failed: %s",
        last + 1, range.high, collection_, result.status().ToString()));
    return false;
  }
  // A refusal with Max already at `last` is a retried copy of a return
  // that applied (its reply was lost): the numbers are back all the same.
  if (!result->applied && result->max != last) {
    returns_refused_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  returns_applied_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void RangeCache::AppendRequests(const UnusedRanges& unused,
                                std::vector<ReturnRequest>* requests) const {
  for (size_t i = 0; i < unused.returns.size(); ++i) {
    const auto& [range, last] = unused.returns[i];
    requests->push_back(
        {collection_, &range, last, /*with_next=*/unused.pair && i == 0});
  }
}

void RangeCache::RecordReturns(
    const UnusedRanges& unused,
    absl::Span<const absl::StatusOr<ReturnResult>> results) {
  // A pair's tail can come back only after the range above it did: when
  // the tail is back, so is the range fetched ahead, even if its own answer
  // says otherwise (a retried copy of a call whose reply was lost).
  bool tail_back = false;
  if (unused.pair && results.size() == 2 && results[1].ok()) {
    tail_back =
        results[1]->applied || results[1]->max == unused.returns[1].second;
  }
  for (size_t i = 0; i < unused.returns.size(); ++i) {
    const auto& [range, last] = unused.returns[i];
    bool refused = false;
    if (i == 0 && tail_back) {
      returns_applied_.fetch_add(1, std::memory_order_relaxed);
    } else {
      refused = RecordReturn(
          range, last,
          i < results.size()
              ? results[i]
              : absl::InternalError("the range source gave no outcome"));
    }
    // Whatever the answer, the client never uses this range again, so its
    // numbers above `last` are no longer held. A return whose outcome is
    // unknown (UNAVAILABLE after a kill -9) may have applied, and then the
    // node's next range rightly starts right after `last`.
    base::MutexLock lock(&mu_);
    previous_.held.Remove(range.node_tag, last + 1, range.high);
    // The first return is of the previous range, the one the next request
    // reports (CONTRACT.md R4). Unless the node refused it, last_max becomes
    // the highest number we used of that node's ranges: at or below its Max
    // for ever, so it never makes the node skip numbers, whatever other
    // clients handed back since. Refused, the range's high stays (at or
    // below Max, as nothing applied).
    if (i == 0 && !refused) {
      const auto used = used_.find(range.node_tag);
      previous_.max = used == used_.end() ? 0 : used->second;
    }
  }
}

void RangeCache::EndReturn(const UnusedRanges& unused) {
  if (unused.returns.empty()) return;
  base::MutexLock lock(&mu_);
  fetching_ = false;
  ++fetches_;
  fetch_error_ = absl::OkStatus();
}

}  // namespace hilo::internal
