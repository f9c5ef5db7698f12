// What the store tests share: a store under test, a manual clock, and
// allocations remembered with their tokens so a test can return them as
// their holder would.
#ifndef HILO_TESTING_RANGE_STORE_FIXTURE_H_
#define HILO_TESTING_RANGE_STORE_FIXTURE_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "service/store/range_store.h"

namespace hilo::testing_util {

inline constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// A token no test ever allocates with.
inline constexpr uint64_t kNeverIssued = 0xdeadbeefcafef00d;

// Tokens for tests: distinct and non-zero. The stores require nothing more
// of them; the service draws real ones from the kernel.
inline uint64_t NextToken() {
  static std::atomic<uint64_t> next{0x1000};
  return next.fetch_add(1);
}

// Mixed into a test fixture, which sets store_ (and may replace it, as a
// restart would).
class RangeStoreFixture {
 protected:
  // Allocates with a fresh token and remembers it, for Return.
  Range MustAllocate(absl::string_view collection, int64_t size,
                     int64_t floor = 0) {
    const uint64_t token = NextToken();
    absl::StatusOr<Range> range =
        store_->Allocate(collection, size, floor, token);
    EXPECT_TRUE(range.ok()) << range.status();
    if (range.ok()) tokens_[{std::string(collection), range->high}] = token;
    return range.value_or(Range{});
  }

  // The token MustAllocate got for the range of `collection` ending at
  // `end` (the latest such range), or one never issued.
  uint64_t TokenOf(absl::string_view collection, int64_t end) const {
    auto it = tokens_.find({std::string(collection), end});
    return it == tokens_.end() ? kNeverIssued : it->second;
  }

  // A return by the holder of the range ending at `end`.
  absl::StatusOr<ReturnOutcome> Return(absl::string_view collection,
                                       int64_t end, int64_t last) {
    return store_->Return(collection, end, last, TokenOf(collection, end));
  }

  CollectionState MustGet(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> state =
        store_->Get(collection);
    EXPECT_TRUE(state.ok() && state->has_value()) << state.status();
    return state.ok() ? state->value_or(CollectionState{}) : CollectionState{};
  }

  // The stored Max, or -1 if there is no row.
  int64_t StoredMax(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> state =
        store_->Get(collection);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() && state->has_value() ? (*state)->max : -1;
  }

  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::map<std::pair<std::string, int64_t>, uint64_t> tokens_;
  std::unique_ptr<RangeStore> store_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_RANGE_STORE_FIXTURE_H_
