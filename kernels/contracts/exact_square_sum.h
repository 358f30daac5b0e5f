// The exact sum of squares of fp32 (or bf16) values, for a gradient norm that does not depend on how
// the values are split among ranks (train.deterministic: docs/zero_memory.md, "The same bits at
// any rank count").
//
// [Note: exact sums of squares] A finite fp32 x is m * 2^e with m < 2^24 an integer and
// e >= -149, so x^2 = m^2 * 2^(2e) is an integer (m^2 < 2^48) times a power of two no smaller
// than 2^-298. Every square is therefore an integer multiple of 2^-298, and so is any sum of them:
// the sum is kept exactly as that integer, in base-2^32 digits held in 64-bit words (each add puts
// less than 2^32 into a word, so a word takes 2^31 adds before its carries must be propagated).
// Integer addition is associative, so any partition of the values (a rank's shard, a thread's
// chunk, a GPU block) summed in any order gives the same integer, and its one conversion to a
// double gives the same bits whatever the rank count, thread count or backend. Non-finite values
// are counted apart: a sum with any of them converts to NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/contracts/host_device.h"

namespace zt::exact_sum {

constexpr int kDigitBits = 32;
constexpr std::uint64_t kDigitMask = 0xffffffffu;
// Digit 0 weighs 2^kLowestExponent. The largest square, (2^128)^2, reaches bit 554 above it; 20
// digits (640 bits) leave 86 bits for the count of values.
constexpr int kLowestExponent = -298;
constexpr int kDigits = 20;
// Adds one word takes at most per value (three digits) before its carries must move up: 2^31.
constexpr std::int64_t kValuesBetweenCarries = std::int64_t{1} << 30;

// The sum: digits (not normalized while adding: a word may exceed 2^32) and the non-finite count.
struct SquareSum {
  std::uint64_t digit[kDigits] = {};
  std::uint64_t nonfinite = 0;
};

// Adds the square of the fp32 value with these bits. `digit` is kDigits words.
ZT_HOST_DEVICE inline void add_square_bits(std::uint64_t* digit, std::uint64_t& nonfinite, std::uint32_t bits) {
  const std::uint32_t e = (bits >> 23) & 0xffu, f = bits & 0x7fffffu;
  if (e == 0xffu) {
    ++nonfinite;
    return;
  }
  if (e == 0 && f == 0) return;
  const std::uint64_t m = e == 0 ? f : (f | 0x800000u);
  const int exponent = e == 0 ? -149 : static_cast<int>(e) - 150;  // x = m * 2^exponent
  const std::uint64_t square = m * m;                              // < 2^48
  const int bit = 2 * exponent - kLowestExponent;                  // >= 0
  const int d = bit / kDigitBits, s = bit % kDigitBits;
  // square << s spans up to 80 bits: three digits' worth.
  digit[d] += (square << s) & kDigitMask;
  digit[d + 1] += (s == 0 ? square >> 32 : square >> (kDigitBits - s)) & kDigitMask;
  if (s > 16) digit[d + 2] += square >> (2 * kDigitBits - s);
}

// Propagates carries so that every digit is below 2^32 (the top digit keeps what overflows).
ZT_HOST_DEVICE inline void normalize(std::uint64_t* digit) {
  std::uint64_t carry = 0;
  for (int k = 0; k < kDigits; ++k) {
    const std::uint64_t v = digit[k] + carry;
    carry = k + 1 < kDigits ? v >> kDigitBits : 0;
    digit[k] = k + 1 < kDigits ? v & kDigitMask : v;
  }
}

// a += b, exactly (both normalized, or with room for the adds).
inline void add(SquareSum& a, const SquareSum& b) {
  for (int k = 0; k < kDigits; ++k) a.digit[k] += b.digit[k];
  a.nonfinite += b.nonfinite;
  normalize(a.digit);
}

// The exact sum as a double, by one fixed computation (equal sums give equal bits): the digits
// converted (each exactly) and added from the lowest up, which is within a few ulps of the sum's
// nearest double. NaN when any value was not finite.
inline double to_double(const SquareSum& sum) {
  if (sum.nonfinite > 0) return std::numeric_limits<double>::quiet_NaN();
  SquareSum s = sum;
  normalize(s.digit);
  double total = 0.0;
  for (int k = 0; k < kDigits; ++k) {
    total += std::ldexp(static_cast<double>(s.digit[k]), kLowestExponent + k * kDigitBits);
  }
  return total;
}

}  // namespace zt::exact_sum
