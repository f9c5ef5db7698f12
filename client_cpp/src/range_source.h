// RangeSource: where a RangeCache gets its ranges and returns their tails.
//
// GrpcRangeSource talks to hilo servers; tests substitute their own.
#ifndef HILO_CLIENT_CPP_SRC_RANGE_SOURCE_H_
#define HILO_CLIENT_CPP_SRC_RANGE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client_cpp/src/held_numbers.h"

namespace hilo::internal {

// The longest node tag (proto: NextRangeResponse.node_tag).
inline constexpr size_t kMaxNodeTagSize = 4;

// The client's one rule for a node tag: 1-4 characters, each A-Z or 0-9.
// A range whose tag breaks it is never handed out.
inline bool IsValidNodeTag(absl::string_view tag) {
  if (tag.empty() || tag.size() > kMaxNodeTagSize) return false;
  for (const char c : tag) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// The most numbers a client takes in one range (CONTRACT.md R11): a server's
// ranges are at most its --max_range_size (2^20 by default), and a bigger
// one is a reply that was tampered with or a broken server, whose high
// echoed as last_max would then be refused by every node.
inline constexpr int64_t kMaxRangeSize = int64_t{1} << 32;

// google.protobuf.Timestamp's range, 0001-01-01T00:00:00Z to
// 9999-12-31T23:59:59Z: a range_at outside it is refused, never echoed.
inline constexpr int64_t kMinTimestampSeconds = -62135596800;
inline constexpr int64_t kMaxTimestampSeconds = 253402300799;

// What the client tells the server about its previous range of a collection
// (size, range_at, max), and what a reply is checked against (held).
struct PreviousRange {
  int64_t size = 0;                    // 0 if none
  std::optional<absl::Time> range_at;  // nullopt if none
  int64_t max = 0;                     // its high (or the last number
                                       // used, after a return); 0 if none
  // Not sent. Per node tag, the numbers of the collection the client holds
  // or handed out from that node's ranges (a range's unused numbers are
  // dropped when it is handed back). A range of that node overlapping them
  // is refused (CONTRACT.md R11): its numbers could be handed out twice.
  HeldNumbers held;
};

// A range as a server issued it.
struct IssuedRange {
  int64_t low = 0;
  int64_t high = 0;
  std::string node_tag;  // IsValidNodeTag
  absl::Time range_at;
  size_t source = 0;   // which target issued it; returns go there
  uint64_t token = 0;  // the range's secret, sent with its return; 0 from a
                       // server older than tokens
};

struct ReturnResult {
  bool applied = false;
  int64_t max = 0;  // the collection's Max after the call
};

// One return of RangeSource::ReturnMany.
struct ReturnRequest {
  absl::string_view collection;
  const IssuedRange* range = nullptr;
  int64_t last = 0;
  // This item and the next are a pair of adjacent ranges of one node (the
  // later range whole, then the unused tail of the earlier one): they go to
  // the node in one call, in this order, so that the node judges the second
  // right after the first, with no other client's request between them.
  bool with_next = false;
};

// Calls fn(0) ... fn(n - 1), on up to `threads` threads at once (this one
// included; fewer if no more can be started).
void ForEachInParallel(size_t n, size_t threads,
                       absl::FunctionRef<void(size_t)> fn);

// Implementations are thread-safe.
class RangeSource {
 public:
  virtual ~RangeSource() = default;

  // The next range of `collection`. Errors carry the server's gRPC code.
  virtual absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                           const PreviousRange& previous) = 0;

  // Hands back (last, range.high] of `range` to the node that issued it,
  // with the range's token. A refusal (applied = false) is an answer, not
  // an error.
  virtual absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                              const IssuedRange& range,
                                              int64_t last) = 0;

  // Many returns; one outcome per item, in order. Items of different
  // collections may be sent at once; a collection's items reach their node
  // in the order given, and a pair (ReturnRequest::with_next) in one call
  // where the node takes batches. This default sends each with Return, many
  // collections at once, a collection's items one after another (a pair as
  // two calls: another client's request may come between them).
  virtual std::vector<absl::StatusOr<ReturnResult>> ReturnMany(
      absl::Span<const ReturnRequest> items);

  // A short name for messages, e.g. the list of targets.
  virtual std::string Describe() const = 0;

  // Next calls that a target other than the preferred one answered, so far
  // (ClientStats::failovers); 0 for a source of one target.
  virtual int64_t failovers() const { return 0; }
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_RANGE_SOURCE_H_
