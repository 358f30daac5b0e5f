// IEEE half to float (engine/base/core/half.h, how F16 safetensors are read): every one of the
// 65,536 bit patterns against the value its fields define, computed apart (ldexp), so subnormals,
// the largest and smallest normals, zeros of both signs, infinities and NaNs are each checked.
#include "engine/base/core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace zt {
namespace {

// The half's value by its definition: (-1)^s * 2^(e - 15) * 1.m, or 2^-14 * 0.m for e = 0.
double half_value(std::uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) return man == 0 ? sign * INFINITY : NAN;
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

TEST(Half, EveryBitPatternReadsAsItsValue) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float got = half_to_float(h);
    const double want = half_value(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << bits;
      ASSERT_EQ(std::signbit(got), (bits & 0x8000u) != 0) << std::hex << bits;  // -0 too
    }
  }
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24)) << "the smallest subnormal";
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f) << "the largest finite half";
}

}  // namespace
}  // namespace zt
