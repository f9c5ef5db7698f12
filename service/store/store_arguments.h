// The checks of a store operation's arguments, made before any row is read:
// RangeStore's entry points make them for every backend, and a batch makes
// them for each of its items. Below both range_store.h and collection_rules.h,
// so that neither has to include the other to reach them.
#ifndef HILO_SERVICE_STORE_STORE_ARGUMENTS_H_
#define HILO_SERVICE_STORE_STORE_ARGUMENTS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace hilo {

// INVALID_ARGUMENT naming the bad argument, or OK.
absl::Status CheckAllocateArguments(int64_t size, int64_t floor, uint64_t token,
                                    int64_t max_floor_jump);
absl::Status CheckReturnArguments(int64_t end, int64_t last);
absl::Status CheckFloorArgument(int64_t floor);
absl::Status CheckListLimit(int limit);

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_STORE_ARGUMENTS_H_
