// RangeCache: one collection's current range, handed out number by number.
//
// The fast path is a single atomic fetch_add on a word that packs the range's
// generation with an offset into it; the range itself sits in one of a few
// slots guarded by a sequence counter, so readers never lock and never read a
// range being rewritten. A reader that finds its range used up (or, very
// rarely, its slot already recycled) takes the slow path: under the mutex,
// exactly one caller fetches the next range from the RangeSource while the
// others wait for it, then the new range is published with one store.
// A number is only ever handed out together with the tag of the range it
// belongs to; numbers skipped by a recycled slot are never handed out.
//
// Why a reader never hands out a number twice, or with another range's tag:
// Publish writes the slot of generation g (seq made odd, a release fence,
// the fields, seq made even with release) before it stores g into state_
// (acq_rel). A reader's fetch_add (acquire) reads that store or a later
// increment of it, so it sees those field writes or later ones; it keeps
// the fields only if seq was even and unchanged around its reads (read
// with acquire, then an acquire fence before the second read: the
// seqlock), if the slot still holds generation g (not g + kSlots written
// over it since), and if its offset is inside the range. Then number and
// suffix come from one publication of one range, and each (generation,
// offset) goes to exactly one fetch_add. Anything else sends the reader to
// the slow path, which takes a new offset; the skipped one is never used.
//
// Cache lines: state_, the one word every call writes, has a line of its
// own; each slot has its own too, written once per range and otherwise
// only read, so the fast path moves no line between cores but state_'s.
//
// Generations are counted modulo 2^kGenerationBits, the width they have in
// the packed word, and compared in that width everywhere (the word, the
// slots, gen_), so the count wraps from 2^24 - 1 to 0 like any other step.
// (A reader would have to stall between its fetch_add and its read of the
// slot for 2^24 range fetches to meet its generation's number again.)
//
// Prefetch: the caller that takes the number at a set share of the range
// (say one fifth) asks for the next range in the background; it is kept
// aside and published the moment the current range runs dry, so callers
// switch ranges without waiting on the network.
//
// Thread-safe.
#ifndef HILO_CLIENT_CPP_SRC_RANGE_CACHE_H_
#define HILO_CLIENT_CPP_SRC_RANGE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client_cpp/src/document_id.h"
#include "client_cpp/src/monotonic_clock.h"
#include "client_cpp/src/range_source.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"

namespace hilo::internal {

class RangeCache {
 public:
  // `source` must outlive the cache. `log` receives best-effort failures.
  // `prefetch_at` in (0, 1) is the share of a range used before the next
  // is fetched ahead through `schedule` (which runs the task it is given
  // later, on another thread); 0 turns prefetching off. `clock` (which
  // must outlive the cache) times the runway (AddStatsTo).
  RangeCache(std::string collection, RangeSource* source,
             std::function<void(absl::string_view)> log, double prefetch_at = 0,
             std::function<void(std::function<void()>)> schedule = nullptr,
             const MonotonicClock* clock = &MonotonicClock::Real());

  // The next number and its tag; see Client::NextId for errors. Inline:
  // while the range lasts this is the fast path alone, in the caller.
  absl::StatusOr<Id> Next();

  // A number and the suffix of its range, "-" and the tag, for a document ID.
  struct Taken {
    int64_t number = 0;
    IdSuffix suffix;
  };
  // As Next, into *taken (left as it was on error).
  absl::Status Take(Taken* taken);

  // Retires the current range and a prefetched one and hands back what is
  // unused: the prefetched range whole first (the server takes back only
  // the range it issued last; a whole return of a range issued right above
  // the current one makes the current one the last issued again), then the
  // current range's unused tail, each with its own token, both in one
  // RangeSource::ReturnMany call (a pair, when the two are adjacent ranges
  // of one node). When they apply, the collection's Max ends at the last
  // number this cache handed out. Unless the node refuses the return of the
  // range fetched last, the next request's `last_max` is the highest number
  // handed out of that node's ranges (CONTRACT.md R4). Best effort; failures
  // go to the log, refusals are normal.
  void ReturnUnused();

  // ReturnUnused in steps, so that a client can hand many caches back in
  // batches: TakeUnused retires the ranges, says what to send, and makes
  // callers wait; AppendRequests adds those returns to a ReturnMany call;
  // RecordReturns counts and logs their outcomes; EndReturn, called exactly
  // once after TakeUnused, lets callers go on.
  struct UnusedRanges {
    std::vector<std::pair<IssuedRange, int64_t>> returns;  // range, last
    // The two returns are a pair of adjacent ranges of one node (README "A
    // pair of adjacent ranges"): the second applies only right after the
    // first, so they must reach the node in one call.
    bool pair = false;
  };
  UnusedRanges TakeUnused();
  const std::string& collection() const { return collection_; }
  // Appends the returns of `unused` to *requests, in order, the first of a
  // pair marked ReturnRequest::with_next. The requests point into `unused`,
  // which must outlive them.
  void AppendRequests(const UnusedRanges& unused,
                      std::vector<ReturnRequest>* requests) const;
  // Counts and logs the outcome of each return of `unused`: results[i] is
  // that of unused.returns[i].
  void RecordReturns(const UnusedRanges& unused,
                     absl::Span<const absl::StatusOr<ReturnResult>> results);
  void EndReturn(const UnusedRanges& unused);

  // Fetches the next range ahead of need, unless one is already fetched or
  // being fetched. Called on the prefetch thread.
  void Prefetch();

  // Fork (fork_guard.h). LockForFork takes the mutex, so that no other
  // thread is half-way through a change when the process forks;
  // UnlockAfterFork lets it go (in the parent). DropAfterForkInChild, with
  // the mutex taken, retires the current range and drops one fetched
  // ahead without handing either back (they are the parent's: CONTRACT.md
  // R16), forgets a fetch or return that was in flight on a thread the
  // child does not have, and leaves the mutex fresh and free. The next
  // request still reports the parent's last range as previous, so the
  // child's first range starts above it.
  void LockForFork() ABSL_EXCLUSIVE_LOCK_FUNCTION(mu_);
  void UnlockAfterFork() ABSL_UNLOCK_FUNCTION(mu_);
  void DropAfterForkInChild() ABSL_UNLOCK_FUNCTION(mu_);

  // Adds this cache's counters to *stats (all but failovers, which the
  // source counts), and sets its runway there: the numbers it holds (the
  // rest of the current range, and a range fetched ahead) divided by the
  // rate it handed numbers out since the range before the current one was
  // published (or the current one, the first), on `clock`. No runway when
  // it holds no range, or handed out no number in that window, or no time
  // passed in it.
  void AddStatsTo(ClientStats* stats);

  // Numbers one range may hold in this cache; a bigger range is used only
  // up to this many numbers (the rest is never handed out).
  static constexpr int kOffsetBits = 40;
  static constexpr int64_t kMaxUsableSize = int64_t{1} << (kOffsetBits - 1);
  // Width of a generation in the packed word; generations wrap at 2^24.
  static constexpr int kGenerationBits = 64 - kOffsetBits;
  static constexpr uint64_t kGenerationMask =
      (uint64_t{1} << kGenerationBits) - 1;

  // Test hook: the next range published is generation `gen` + 1 (modulo
  // 2^kGenerationBits), so a test can cross the wrap in a few steps. Only
  // before the first Next.
  void StartAtGenerationForTesting(uint64_t gen);

 private:
  static constexpr int kSlots = 4;
  // Generation g lives in slots_[g % kSlots], also across the wrap to 0.
  static_assert((kGenerationMask + 1) % kSlots == 0);
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
  // Apart by this much, two fields never share a cache line.
  static constexpr size_t kCacheLine = 64;

  // One published range. Written only under mu_, read without locks.
  struct alignas(kCacheLine) Slot {
    std::atomic<uint64_t> seq{0};  // odd while being written
    std::atomic<uint64_t> gen{0};  // the generation it holds (masked)
    std::atomic<int64_t> low{0};
    std::atomic<int64_t> size{0};
    std::atomic<uint64_t> suffix{0};           // IdSuffix::word() of its tag
    std::atomic<int64_t> prefetch_offset{-1};  // taking it starts a prefetch
  };

  // Fast path. Returns false if the caller must take the slow path for
  // generation *gen.
  bool TryTake(Taken* taken, uint64_t* gen);
  // Slow path of Take: refills from generation `gen`, then takes a number
  // (refilling again if others took the new range first).
  absl::Status TakeAfterRefill(uint64_t gen, Taken* taken);
  // The same for Next.
  absl::StatusOr<Id> NextAfterRefill(uint64_t gen);
  // Fetches or waits for a range newer than `gen`.
  absl::Status Refill(uint64_t gen);
  // Publishes a range as generation gen_ + 1 (modulo 2^kGenerationBits) and
  // makes it the current one; with nullptr, retires the current range.
  // Returns how many numbers of the previous generation were taken.
  int64_t Publish(const IssuedRange* range) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SchedulePrefetch();
  // Counts a failed fetch or return by its code.
  void CountError(const absl::Status& status);
  // Counts and logs one return's outcome; true if the node refused it
  // (false: applied, or failed, its outcome unknown).
  bool RecordReturn(const IssuedRange& range, int64_t last,
                    const absl::StatusOr<ReturnResult>& result);
  // Asks the source for the next range with mu_ released (fetching_ set
  // meanwhile, so other callers wait); on success the range becomes the
  // one the next request reports as previous. A range whose tag breaks
  // IsValidNodeTag is INTERNAL and never used.
  absl::StatusOr<IssuedRange> Fetch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string collection_;
  RangeSource* const source_;
  const std::function<void(absl::string_view)> log_;
  const double prefetch_at_;
  const std::function<void(std::function<void()>)> schedule_;
  const MonotonicClock* const clock_;

  // ClientStats counters: relaxed atomics, moved only where a range is
  // fetched or returned, read by AddStatsTo at any time.
  static constexpr int kStatusCodes =
      static_cast<int>(absl::StatusCode::kUnauthenticated) + 1;
  std::atomic<int64_t> waits_{0};
  std::atomic<int64_t> fetched_{0};
  std::atomic<int64_t> prefetched_{0};
  std::atomic<int64_t> returns_applied_{0};
  std::atomic<int64_t> returns_refused_{0};
  std::atomic<int64_t> returns_failed_{0};
  std::atomic<int64_t> errors_[kStatusCodes] = {};

  // (generation << kOffsetBits) | numbers taken from that generation.
  alignas(kCacheLine) std::atomic<uint64_t> state_{0};
  Slot slots_[kSlots];  // generation g lives in slots_[g % kSlots]

  alignas(kCacheLine) base::Mutex mu_;
  uint64_t gen_ ABSL_GUARDED_BY(mu_) = 0;  // current one, < 2^kGenerationBits
  bool fetching_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t fetches_ ABSL_GUARDED_BY(mu_) = 0;      // completed or failed
  absl::Status fetch_error_ ABSL_GUARDED_BY(mu_);  // of the last fetch
  bool has_next_ ABSL_GUARDED_BY(mu_) = false;     // a prefetched range waits
  IssuedRange next_ ABSL_GUARDED_BY(mu_);          // valid if has_next_
  bool has_range_ ABSL_GUARDED_BY(mu_) = false;
  IssuedRange range_ ABSL_GUARDED_BY(mu_);  // valid if has_range_
  int64_t range_usable_ ABSL_GUARDED_BY(mu_) = 0;
  // Its `held` is kept up to date: each range fetched is added to its
  // node's intervals, each return drops the range's numbers above `last`.
  PreviousRange previous_ ABSL_GUARDED_BY(mu_);
  // Per node tag, the highest number a caller took from that node's
  // retired ranges (absent: none). One entry per tag seen.
  absl::flat_hash_map<std::string, int64_t> used_ ABSL_GUARDED_BY(mu_);
  // The runway's window, moved only by Publish: it began when the range
  // before the current one was published (when the current one was, for
  // the first), and the numbers taken of that earlier range.
  MonotonicClock::TimePoint published_at_ ABSL_GUARDED_BY(mu_);
  MonotonicClock::TimePoint window_start_ ABSL_GUARDED_BY(mu_);
  int64_t window_taken_before_ ABSL_GUARDED_BY(mu_) = 0;
};

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<Id> RangeCache::Next() {
  Taken taken;
  uint64_t gen;
  if (ABSL_PREDICT_TRUE(TryTake(&taken, &gen))) {
    return Id{taken.number, taken.suffix.tag()};
  }
  return NextAfterRefill(gen);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status RangeCache::Take(
    Taken* taken) {
  uint64_t gen;
  if (ABSL_PREDICT_TRUE(TryTake(taken, &gen))) return absl::OkStatus();
  return TakeAfterRefill(gen, taken);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool RangeCache::TryTake(Taken* taken,
                                                             uint64_t* gen) {
  const uint64_t state = state_.fetch_add(1, std::memory_order_acquire);
  *gen = state >> kOffsetBits;
  const int64_t offset = static_cast<int64_t>(state & kOffsetMask);
  const Slot& slot = slots_[*gen % kSlots];
  const uint64_t seq_before = slot.seq.load(std::memory_order_acquire);
  const uint64_t slot_gen = slot.gen.load(std::memory_order_relaxed);
  const int64_t low = slot.low.load(std::memory_order_relaxed);
  const int64_t size = slot.size.load(std::memory_order_relaxed);
  const uint64_t suffix = slot.suffix.load(std::memory_order_relaxed);
  const int64_t prefetch_offset =
      slot.prefetch_offset.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t seq_after = slot.seq.load(std::memory_order_relaxed);
  if ((seq_before & 1) != 0 || seq_before != seq_after || slot_gen != *gen ||
      offset >= size) {
    return false;
  }
  taken->number = low + offset;
  taken->suffix = IdSuffix::FromWord(suffix);
  // Exactly one caller takes this offset of this range.
  if (ABSL_PREDICT_FALSE(offset == prefetch_offset)) SchedulePrefetch();
  return true;
}

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_RANGE_CACHE_H_
