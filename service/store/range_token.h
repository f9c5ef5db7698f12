// Range tokens: the secret that proves a caller holds the range it returns.
#ifndef HILO_SERVICE_STORE_RANGE_TOKEN_H_
#define HILO_SERVICE_STORE_RANGE_TOKEN_H_

#include <cstdint>

namespace hilo {

// 64 bits from the kernel's random source (getrandom), never 0. Not a
// counter, not seeded by time: a caller that sees many tokens learns
// nothing about the next. Thread-safe.
uint64_t NewRangeToken();

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_RANGE_TOKEN_H_
