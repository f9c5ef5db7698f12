// Checks on the names a request or a flag carries.
//
// Both return OK or INVALID_ARGUMENT with a message that names the problem,
// e.g. "collection name is 300 bytes; the limit is 256".
#ifndef HILO_SERVICE_STORE_VALIDATION_H_
#define HILO_SERVICE_STORE_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hilo {

inline constexpr size_t kMaxCollectionNameBytes = 256;
inline constexpr size_t kMaxNodeTagLength = 4;

// The highest number a caller may name as a floor: NextRange's last_max or
// SetFloor's floor. Max then stays at least 2^62 (4.6e18) below INT64_MAX, so
// no single request can push a collection to the end of the int64 space
// and leave every later NextRange OUT_OF_RANGE for good; reaching it by
// ranges alone takes over 4 billion ranges of the largest size.
inline constexpr int64_t kMaxFloor = int64_t{1} << 62;

// A collection name is 1-256 bytes of valid UTF-8 (no overlong forms, no
// surrogates, nothing past U+10FFFF) with no control characters (C0, DEL or
// C1). Names are compared byte for byte; no normalization is applied.
absl::Status ValidateCollectionName(absl::string_view name);

// A floor named by a request (`field` is "last_max" or "floor") is 0 to
// kMaxFloor. INVALID_ARGUMENT naming the field, `collection` and the limit.
absl::Status ValidateFloor(absl::string_view field, int64_t value,
                           absl::string_view collection);

// A node tag is 1-4 characters of A-Z and 0-9.
absl::Status ValidateNodeTag(absl::string_view tag);

// The node tag of a pod-like host name ending in "-<ordinal>", as a
// StatefulSet names its pods: hilo-0 -> A, hilo-25 -> Z, hilo-26 -> AA,
// hilo-27 -> AB, ... (bijective base 26, up to four letters). INVALID_ARGUMENT
// if the name has no such ordinal or the ordinal needs more than 4 letters.
absl::StatusOr<std::string> NodeTagFromHostname(absl::string_view hostname);

// `count` distinct 4-character tags (A-Z, 0-9) hashed from any host name,
// as a Deployment's pods get (hilo-7c9d5b8f4-x2x7q): the tag the host
// prefers, then the ones it takes when other servers hold the earlier ones
// (a shared store leases tags; see NodeTagLease). The same name always gives
// the same tags. Never for a store per node, where two hosts may not share a
// tag and nothing would stop them.
std::vector<std::string> NodeTagsHashedFromHostname(absl::string_view hostname,
                                                    int count);

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_VALIDATION_H_
