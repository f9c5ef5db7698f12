// The collection names a client takes (CONTRACT.md R19): 1 to 256 bytes of
// well-formed UTF-8 without control characters, the names a node accepts.
// The client judges a name itself before it keeps anything for it, so a
// caller naming many collections no node would take grows the client by
// nothing, and a name that is not UTF-8 is never put on the wire.
#ifndef HILO_CLIENT_CPP_SRC_COLLECTION_NAME_H_
#define HILO_CLIENT_CPP_SRC_COLLECTION_NAME_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hilo::internal {

// The longest name a node accepts, in bytes (hilo.proto).
inline constexpr size_t kMaxCollectionNameBytes = 256;

// OK, or INVALID_ARGUMENT naming the rule `name` breaks (and, for a name of
// at most kMaxCollectionNameBytes, the name, escaped).
absl::Status CheckCollectionName(absl::string_view name);

// Where `name` stops being well-formed UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos.
size_t InvalidUtf8At(absl::string_view name);

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_COLLECTION_NAME_H_
