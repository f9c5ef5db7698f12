// Decimal text of an unsigned 64-bit number, for document IDs.
//
// The number of digits first, from the number's bit length, then the digits
// written from the last one backwards, two at a time from a table of "00"
// to "99": no locale, no allocation, no loop over single digits.
//
//   char text[kMaxDecimalDigits];
//   const int n = DecimalDigits(12345);   // 5
//   WriteDecimal(12345, n, text);         // text[0, 5) == "12345"
//
// Pure functions; safe from any thread.
#ifndef HILO_CLIENT_CPP_SRC_DECIMAL_H_
#define HILO_CLIENT_CPP_SRC_DECIMAL_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"

namespace hilo::internal {

// Digits of the largest uint64_t, 18446744073709551615.
inline constexpr int kMaxDecimalDigits = 20;

namespace decimal_internal {

// "00" "01" ... "99".
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[2 * i] = static_cast<char>('0' + i / 10);
    pairs[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

// kBounds[t] is 10^t, except kBounds[0], which is 0 so that 0 has a digit.
inline constexpr std::array<uint64_t, kMaxDecimalDigits> kBounds = [] {
  std::array<uint64_t, kMaxDecimalDigits> bounds{};
  uint64_t power = 1;
  for (int t = 1; t < kMaxDecimalDigits; ++t) {
    power *= 10;
    bounds[t] = power;
  }
  return bounds;
}();

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void WritePair(uint32_t pair, char* out) {
  std::memcpy(out, &kDigitPairs[2 * pair], 2);
}

}  // namespace decimal_internal

// How many decimal digits `n` has: 1 for 0 through 9, 20 for the largest.
// t = bit_width(n) * 1233 / 4096 (1233 / 4096 is log10(2) within 1e-5) is
// either that count or one less; whether n is below 10^t tells which.
ABSL_ATTRIBUTE_ALWAYS_INLINE constexpr int DecimalDigits(uint64_t n) {
  const int t = (std::bit_width(n) * 1233) >> 12;
  return t + 1 - (n < decimal_internal::kBounds[t] ? 1 : 0);
}

// Writes the decimal digits of `n` to out[0, digits), where `digits` is
// DecimalDigits(n). Writes nothing else.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void WriteDecimal(uint64_t n, int digits,
                                                      char* out) {
  using decimal_internal::WritePair;
  char* p = out + digits;
  // Four digits a step: the two pairs of a step do not wait for each other,
  // only for the one division of the step.
  while (n >= 10000) {
    const uint64_t rest = n / 10000;
    const auto four = static_cast<uint32_t>(n - rest * 10000);
    p -= 4;
    WritePair(four / 100, p);
    WritePair(four % 100, p + 2);
    n = rest;
  }
  auto m = static_cast<uint32_t>(n);  // below 10000: 1 to 4 digits
  if (m >= 100) {
    p -= 2;
    WritePair(m % 100, p);
    m /= 100;
  }
  if (m >= 10) {
    WritePair(m, p - 2);
  } else {
    p[-1] = static_cast<char>('0' + m);
  }
}

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_DECIMAL_H_
