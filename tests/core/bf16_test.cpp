// Tests for engine/base/core/bf16.h: fp32 -> bf16 rounds to nearest, ties to even, keeps NaN and Inf,
// overflows to Inf; bf16 -> fp32 is exact and round trips are lossless.
#include "engine/base/core/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace zt {
namespace {

std::uint16_t to_bf16_bits(std::uint32_t f32_bits) { return float_to_bf16(std::bit_cast<float>(f32_bits)).bits; }

TEST(Bf16, RoundsTiesToEven) {
  EXPECT_EQ(to_bf16_bits(0x3F808000u), 0x3F80);  // 1 + 2^-8: halfway, 0x3F80 is even -> down
  EXPECT_EQ(to_bf16_bits(0x3F818000u), 0x3F82);  // halfway between 0x3F81 and 0x3F82 -> up to even
  EXPECT_EQ(to_bf16_bits(0xBF808000u), 0xBF80);  // negative tie, even below
  EXPECT_EQ(to_bf16_bits(0xBF818000u), 0xBF82);  // negative tie, even above
  EXPECT_EQ(to_bf16_bits(0x00008000u), 0x0000);  // denormal tie to even zero
  EXPECT_EQ(to_bf16_bits(0x00018000u), 0x0002);  // denormal tie up to even
}

TEST(Bf16, RoundsToNearestAwayFromTies) {
  EXPECT_EQ(to_bf16_bits(0x3F808001u), 0x3F81);  // just above half -> up
  EXPECT_EQ(to_bf16_bits(0x3F807FFFu), 0x3F80);  // just below half -> down
  EXPECT_EQ(to_bf16_bits(0x3F80FFFFu), 0x3F81);
  EXPECT_EQ(to_bf16_bits(0x3FFFFFFFu), 0x4000);  // carry into the exponent
}

TEST(Bf16, KeepsNanAndInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(inf).bits, 0x7F80);
  EXPECT_EQ(float_to_bf16(-inf).bits, 0xFF80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // NaNs whose payload sits only in the low bits must not truncate or round to Inf.
  for (std::uint32_t nan_bits : {0x7F800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0xFF800001u, 0x7F80FFFFu}) {
    const bf16 h = float_to_bf16(std::bit_cast<float>(nan_bits));
    EXPECT_TRUE(std::isnan(bf16_to_float(h))) << std::hex << nan_bits;
    EXPECT_EQ(h.bits & 0x8000, (nan_bits >> 16) & 0x8000) << "sign kept for " << std::hex << nan_bits;
  }
}

TEST(Bf16, LargeFiniteValuesOverflowToInfinity) {
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()).bits, 0x7F80);  // rounds past bf16 max
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()).bits, 0xFF80);
  EXPECT_EQ(to_bf16_bits(0x7F7F8000u), 0x7F80);  // tie above the largest bf16, odd -> up to Inf
  EXPECT_EQ(to_bf16_bits(0x7F7F7FFFu), 0x7F7F);  // stays the largest finite bf16
}

TEST(Bf16, RoundTripIsExactForEveryBf16Value) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const bf16 h{static_cast<std::uint16_t>(bits)};
    const float f = bf16_to_float(h);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f), bits << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
    } else {
      ASSERT_EQ(float_to_bf16(f).bits, bits) << std::hex << bits;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(round_to_bf16(f)), bits << 16);
    }
  }
}

TEST(Bf16, SignedZerosSurvive) {
  EXPECT_EQ(float_to_bf16(0.0f).bits, 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f).bits, 0x8000);
}

}  // namespace
}  // namespace zt
