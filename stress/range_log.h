// Range log: what one client was told by hilo servers, and what follows
// from it.
//
// A RangeEvent is one line of a worker's log: a range a server replied with
// (R), a return about to be sent (I, written before the request leaves), or
// the outcome of that return (O), each with its range_token. From one
// client's events, UsedRanges gives each replied range with the highest
// number the client may have used from it (its high, or `last` once it sent
// a return for it: the client retires a range before returning it) and the
// highest the node must still count as handed out (its high, unless a
// return applied or may have). A return is matched to its range by its
// token; FindTokenProblems lists returns that carry no token or another
// range's. From every client's ranges:
//   - FindOverlaps: two ranges one node replied for one collection must not
//     overlap (after returns they may only touch).
//   - Floors: the highest held number per (collection, node); the node's
//     stored Max must never be below it.
//
//   std::vector<RangeEvent> events = ...;  // one client's, in order
//   std::vector<UsedRange> used = UsedRanges(events);
//   std::vector<std::string> problems = FindOverlaps(used);
#ifndef HILO_STRESS_RANGE_LOG_H_
#define HILO_STRESS_RANGE_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hilo::stress {

struct RangeEvent {
  enum class Kind : char {
    kRange = 'R',          // a = low, b = high
    kReturnIntent = 'I',   // a = end, b = last
    kReturnOutcome = 'O',  // a = end, b = last, code, applied
  };
  Kind kind = Kind::kRange;
  std::string collection;
  std::string node_tag;
  int64_t a = 0;
  int64_t b = 0;
  int code = 0;  // grpc::StatusCode of a return
  bool applied = false;
  // range_token of the range replied, or of the range a return hands back
  // (0: none).
  uint64_t token = 0;

  static RangeEvent Range(std::string collection, std::string tag, int64_t low,
                          int64_t high, uint64_t token);
  static RangeEvent ReturnIntent(std::string collection, std::string tag,
                                 int64_t end, int64_t last, uint64_t token);
  static RangeEvent ReturnOutcome(std::string collection, std::string tag,
                                  int64_t end, int64_t last, uint64_t token,
                                  int code, bool applied);
};

// One line, with its newline. Collection names must not contain spaces or
// newlines (the stress tool's never do).
std::string FormatEvent(const RangeEvent& event);
// The inverse of FormatEvent (without the newline). INVALID_ARGUMENT for a
// line that is not one.
absl::StatusOr<RangeEvent> ParseEvent(absl::string_view line);

// A range a node replied with, and the part of it its client may have used.
struct UsedRange {
  std::string collection;
  std::string node_tag;
  int64_t low = 0;
  int64_t high = 0;
  uint64_t token = 0;  // its range_token
  // The highest number the client may have taken from it: high, or the
  // `last` of a return sent for it (low - 1 if it took none).
  int64_t used_high = 0;
  // The highest number the node must still count as handed out: high,
  // unless a return for it applied (or may have: its outcome is unknown),
  // then its `last`.
  int64_t held_high = 0;
  // A return was sent and its outcome is unknown (an RPC error, or a
  // refused retry of a return that failed so: the first copy may have
  // applied): the node may hold Max at held_high or at high.
  bool return_unknown = false;
};

// The ranges of one client's events, in the order they were replied. A
// return with a token belongs to the range with that token (retries of it
// too); one without, to the latest range of its collection and tag with
// that high not yet returned.
std::vector<UsedRange> UsedRanges(const std::vector<RangeEvent>& events);

// What one client's events show it did wrong with tokens, described: a
// range replied without a token, a return sent without one, or with a token
// that is not of the range it names (collection, end and tag) among those
// the client was given before.
std::vector<std::string> FindTokenProblems(
    const std::vector<RangeEvent>& events);

// Pairs of used ranges of one (collection, node) that overlap, described.
std::vector<std::string> FindOverlaps(const std::vector<UsedRange>& ranges);

using CollectionAndTag = std::pair<std::string, std::string>;

// The highest held number per (collection, node tag).
std::map<CollectionAndTag, int64_t> Floors(
    const std::vector<UsedRange>& ranges);

// Numbers in [1, max] of (collection, node) that no used range covers and
// that are not an unknown return's tail. With one node and no lost replies
// there are none: a range the node failed to reply with was never taken.
// `maxes` holds the stored Max per (collection, node).
std::vector<std::string> FindGaps(
    const std::vector<UsedRange>& ranges,
    const std::map<CollectionAndTag, int64_t>& maxes);

}  // namespace hilo::stress

#endif  // HILO_STRESS_RANGE_LOG_H_
