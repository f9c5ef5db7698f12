// What a client holds or handed out of each node's ranges of one
// collection (CONTRACT.md R11). A reply overlapping it is refused: the node
// went back (a store restored, a failover it did not see) and could issue
// those numbers again. Any other range of that node, below, between or
// above, repeats nothing of this client's and is taken.
#ifndef HILO_CLIENT_CPP_SRC_HELD_NUMBERS_H_
#define HILO_CLIENT_CPP_SRC_HELD_NUMBERS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hilo::internal {

// [low, high], both in.
using HeldInterval = std::pair<int64_t, int64_t>;

// Per node tag, at most kMaxHeldIntervals sorted, disjoint intervals that
// cover every number of that node the client holds or handed out. When one
// more would be needed, two neighbours below the two highest intervals,
// those with the smallest gap between them, become one (the lowest pair on
// a tie): the union only grows, so a range may be refused that need not
// be, never the other way round (MergeClosest says why not the two
// highest). A range handed back loses its unused numbers.
// At most kMaxHeldTags tags are kept; a reply of a new tag past that is
// refused, since a tag's numbers are never forgotten while it could repeat
// them. Not thread-safe: the range cache guards it; sources check a copy.
class HeldNumbers {
 public:
  static constexpr size_t kMaxHeldIntervals = 4;
  static constexpr size_t kMaxHeldTags = 256;

  // OK, or INTERNAL saying why `low`-`high` of `tag` may not be taken.
  absl::Status Check(absl::string_view tag, int64_t low, int64_t high) const;
  void Add(absl::string_view tag, int64_t low, int64_t high);
  // Forgets low..high (numbers handed back unused); nothing if low > high.
  void Remove(absl::string_view tag, int64_t low, int64_t high);
  std::vector<HeldInterval> Intervals(absl::string_view tag) const;

 private:
  absl::flat_hash_map<std::string, std::vector<HeldInterval>> by_tag_;
};

// The two list operations HeldNumbers is made of, for its tests: `spans`
// (sorted, disjoint) with low..high added (touching intervals become one)
// or taken out, then merged down to kMaxHeldIntervals.
std::vector<HeldInterval> AddInterval(std::vector<HeldInterval> spans,
                                      int64_t low, int64_t high);
std::vector<HeldInterval> RemoveInterval(const std::vector<HeldInterval>& spans,
                                         int64_t low, int64_t high);

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_HELD_NUMBERS_H_
