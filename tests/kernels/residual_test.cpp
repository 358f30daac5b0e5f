// Tests for kernels/cpu/residual: out = a + b (with aliasing) and dst += src for F32 and BF16
// destinations, the latter rounded once to nearest even.
#include "kernels/cpu/residual.h"

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::view_of;

TEST(ResidualForward, MatchesFp64ReferenceAndAllowsAliasing) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {13, 40000}) {  // 40000 spans several parallel blocks
    auto a = rng.uniform(n), b = rng.uniform(n);
    std::vector<float> out(n);
    residual_forward(cpu_ctx(), view_of(out), view_of(a), view_of(b));
    std::vector<double> ref(n);
    for (std::int64_t i = 0; i < n; ++i) ref[i] = static_cast<double>(a[i]) + b[i];
    // One fp32 add per element: half an ulp (6e-8) of the largest sum.
    EXPECT_TRUE(close_normwise(out, ref, 1e-7));
    auto inplace = a;
    residual_forward(cpu_ctx(), view_of(inplace), view_of(inplace), view_of(b));
    EXPECT_TRUE(test::bitwise_equal(inplace, out)) << "out aliasing a";
  }
}

TEST(AccumulateInto, AddsIntoF32Destination) {
  ZT_SEEDED_RNG(rng);
  auto dst = rng.uniform(1001), src = rng.uniform(1001);
  std::vector<float> expected(dst.size());
  for (std::size_t i = 0; i < dst.size(); ++i) expected[i] = dst[i] + src[i];
  accumulate_into(cpu_ctx(), view_of(dst), view_of(src));
  EXPECT_TRUE(test::bitwise_equal(dst, expected));
}

TEST(AccumulateInto, AddsIntoBf16DestinationRoundingOnceToNearestEven) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 40000;
  auto start = rng.uniform(n), src = rng.uniform(n, -0.01f, 0.01f);
  std::vector<bf16> dst(n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(start[i]);
  std::vector<bf16> expected(n);
  for (std::int64_t i = 0; i < n; ++i) expected[i] = float_to_bf16(bf16_to_float(dst[i]) + src[i]);
  accumulate_into(cpu_ctx(), view_of(dst), view_of(src));
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i].bits, expected[i].bits) << "element " << i;

  // A sum exactly halfway between two bf16 values rounds to the even one: 1 + 2^-8 -> 1.
  std::vector<bf16> one{float_to_bf16(1.0f)};
  std::vector<float> half_ulp{1.0f / 256.0f};
  accumulate_into(cpu_ctx(), view_of(one), view_of(half_ulp));
  EXPECT_EQ(one[0].bits, 0x3F80);
}

TEST(AccumulateInto, RejectsBf16SourceAndLengthMismatch) {
  std::vector<float> f(4);
  std::vector<bf16> h(4);
  std::vector<float> f5(5);
  EXPECT_THROW(accumulate_into(cpu_ctx(), view_of(f), view_of(h)), InternalError);
  EXPECT_THROW(accumulate_into(cpu_ctx(), view_of(f), view_of(f5)), InternalError);
}

TEST(Scale, EachElementOneProductAndF32Only) {
  ZT_SEEDED_RNG(rng);
  std::vector<float> x = rng.normal(1001), want = x;
  for (float& v : want) v = static_cast<float>(static_cast<double>(v) * static_cast<double>(1.0f / 6.0f));
  scale(cpu_ctx(), view_of(x), 1.0f / 6.0f);
  EXPECT_EQ(x, want) << "fp32 products are the fp64 products rounded once";
  std::vector<bf16> h(4);
  EXPECT_THROW(scale(cpu_ctx(), view_of(h), 0.5f), InternalError);
}

}  // namespace
}  // namespace zt::cpu
