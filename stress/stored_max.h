// The Max each collection has stored, as the stored-Max checks read it:
// from a stopped node's database file, or served by a running node.
//
//   absl::StatusOr<std::map<std::string, int64_t>> maxes =
//       ReadStoredMaxFromFile(node.db_path);   // node killed
//   maxes = ListStoredMax(node);               // node running
#ifndef HILO_STRESS_STORED_MAX_H_
#define HILO_STRESS_STORED_MAX_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "stress/node.h"

namespace hilo::stress {

// Max by collection in the SQLite database at `path`, through the store
// opened read-only (nothing is created, written or checkpointed). The
// server must not be running. Errors are the read-only open's and List's
// (NOT_FOUND: no file; FAILED_PRECONDITION: not a hilo database).
absl::StatusOr<std::map<std::string, int64_t>> ReadStoredMaxFromFile(
    const std::string& path);

// Max by collection as `node` serves it, through ListCollections a page at
// a time (thousands of collections take a few calls, not thousands).
// UNAVAILABLE, naming the node and the code, if a call fails.
absl::StatusOr<std::map<std::string, int64_t>> ListStoredMax(Node& node);

}  // namespace hilo::stress

#endif  // HILO_STRESS_STORED_MAX_H_
