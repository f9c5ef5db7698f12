// The C++ client's decimal conversion (client_cpp/src/decimal.h): the digit
// count and the digits of any uint64_t, checked against std::to_chars and
// absl::StrCat, which print the same text by their own contracts.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_cpp/src/decimal.h"
#include "gtest/gtest.h"

namespace hilo::internal {
namespace {

// What a reader of the contract expects: the text std::to_chars writes.
std::string Oracle(uint64_t n) {
  char text[32];
  const std::to_chars_result r = std::to_chars(text, text + sizeof(text), n);
  return std::string(text, r.ptr);
}

// Converts `n` into the middle of a buffer of guard bytes, so a write
// outside [0, digits) shows.
std::string Converted(uint64_t n) {
  constexpr char kGuard = '#';
  char buffer[8 + kMaxDecimalDigits + 8];
  std::fill(std::begin(buffer), std::end(buffer), kGuard);
  char* const out = buffer + 8;
  const int digits = DecimalDigits(n);
  EXPECT_GE(digits, 1) << n;
  EXPECT_LE(digits, kMaxDecimalDigits) << n;
  if (digits < 1 || digits > kMaxDecimalDigits) return "";
  WriteDecimal(n, digits, out);
  for (char* p = buffer; p < out; ++p) EXPECT_EQ(*p, kGuard) << n;
  for (char* p = out + digits; p < std::end(buffer); ++p) {
    EXPECT_EQ(*p, kGuard) << n << " wrote past its " << digits << " digits";
  }
  return std::string(out, static_cast<size_t>(digits));
}

void ExpectPrintedRight(uint64_t n) {
  const std::string want = Oracle(n);
  EXPECT_EQ(DecimalDigits(n), static_cast<int>(want.size())) << n;
  EXPECT_EQ(Converted(n), want);
}

TEST(DecimalTest, ZeroIsOneDigit) {
  EXPECT_EQ(DecimalDigits(0), 1);
  EXPECT_EQ(Converted(0), "0");
}

// The digit count changes at each power of ten: the number, one below and
// one above, for every power of ten a uint64_t holds.
TEST(DecimalTest, EveryPowerOfTenAndItsNeighbours) {
  uint64_t power = 1;
  for (int exponent = 0; exponent <= 19; ++exponent) {
    SCOPED_TRACE(absl::StrCat("10^", exponent));
    ExpectPrintedRight(power - 1);
    ExpectPrintedRight(power);
    ExpectPrintedRight(power + 1);
    EXPECT_EQ(DecimalDigits(power), exponent + 1);
    EXPECT_EQ(Converted(power), absl::StrCat("1", std::string(exponent, '0')));
    if (exponent < 19) power *= 10;
  }
}

// The estimate comes from the bit length, which changes at each power of
// two: the number, one below and one above, for every bit length.
TEST(DecimalTest, EveryPowerOfTwoAndItsNeighbours) {
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t power = uint64_t{1} << bit;
    ExpectPrintedRight(power - 1);
    ExpectPrintedRight(power);
    ExpectPrintedRight(power + 1);
  }
}

TEST(DecimalTest, TheLargestNumbers) {
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Converted(kInt64Max), "9223372036854775807");
  EXPECT_EQ(Converted(kInt64Max), absl::StrCat(kInt64Max));
  EXPECT_EQ(Converted(kInt64Max - 1), absl::StrCat(kInt64Max - 1));
  EXPECT_EQ(Converted(uint64_t{kInt64Max} + 1), "9223372036854775808");
  EXPECT_EQ(Converted(std::numeric_limits<uint64_t>::max()),
            "18446744073709551615");
  EXPECT_EQ(DecimalDigits(std::numeric_limits<uint64_t>::max()), 20);
}

// Every digit in every position: the first hundred thousand numbers whole.
TEST(DecimalTest, EveryNumberBelowOneHundredThousand) {
  for (uint64_t n = 0; n < 100000; ++n) {
    ASSERT_EQ(Converted(n), Oracle(n));
  }
}

// Random numbers of every length (a random bit length, then random bits),
// against absl::StrCat. The seed is fixed so a failure repeats.
TEST(DecimalTest, RandomNumbersOfEveryLength) {
  std::mt19937_64 random(20261126);
  for (int i = 0; i < 200000; ++i) {
    const int bits = static_cast<int>(random() % 65);
    const uint64_t n = bits == 0 ? 0 : random() >> (64 - bits);
    ASSERT_EQ(Converted(n), absl::StrCat(n)) << "bits " << bits;
  }
}

}  // namespace
}  // namespace hilo::internal
