// Tests for kernels/cpu/cast: F32 <-> BF16 conversion agrees with zt::float_to_bf16 bit for bit
// (including NaN, Inf and ties), BF16 -> F32 is exact, equal dtypes copy, bad requests throw.
#include "kernels/cpu/cast.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::cpu_ctx;
using test::view_of;

TEST(Cast, F32ToBf16MatchesScalarRoundingIncludingSpecialValues) {
  ZT_SEEDED_RNG(rng);
  auto src = rng.normal(40000, 0.0f, 100.0f);  // several parallel blocks
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f, std::bit_cast<float>(0x3F808000u),
                  std::bit_cast<float>(0x3F818000u), std::numeric_limits<float>::max()}) {
    src.push_back(s);
  }
  std::vector<bf16> dst(src.size());
  cast(cpu_ctx(), view_of(dst), view_of(src));
  for (std::size_t i = 0; i < src.size(); ++i) ASSERT_EQ(dst[i].bits, float_to_bf16(src[i]).bits) << "element " << i;
}

TEST(Cast, Bf16ToF32IsExactAndSameDtypeCopies) {
  std::vector<bf16> src(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) src[i].bits = static_cast<std::uint16_t>(i);  // every bf16 pattern
  std::vector<float> dst(src.size());
  cast(cpu_ctx(), view_of(dst), view_of(src));
  for (std::uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(dst[i]), i << 16) << i;

  std::vector<float> copy(dst.size());
  cast(cpu_ctx(), view_of(copy), view_of(dst));
  EXPECT_TRUE(test::bitwise_equal(copy, dst));
}

TEST(Cast, RejectsLengthMismatchAndUnsupportedDtypes) {
  std::vector<float> f(4), f5(5);
  std::vector<std::int32_t> ints(4);
  EXPECT_THROW(cast(cpu_ctx(), view_of(f5), view_of(f)), InternalError);
  EXPECT_THROW(cast(cpu_ctx(), view_of(f), view_of(ints)), InternalError);
}

}  // namespace
}  // namespace zt::cpu
