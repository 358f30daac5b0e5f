// Tests for kernels/cpu/int8_blocks against the rule of kernels/contracts/int8_blocks.h, restated
// here independently in double precision: each block's scale is its largest magnitude / 127, every
// value comes back within half a step of the scale (the error bound quantized collectives rely on),
// the largest magnitude comes back as +-127 steps, an all-zero block is zeros, a block with a NaN or
// an infinity comes back NaN and only that block, BF16 input quantizes its widened values, and the
// accumulating form adds exactly what the plain one writes. Fresh random inputs of many magnitudes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/contracts/int8_blocks.h"
#include "kernels/cpu/int8_blocks.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

using int8_blocks::kBlock;

std::vector<float> scaled_inputs(Rng& rng, std::int64_t n) {
  std::vector<float> v = rng.normal(n);
  const std::vector<float> e = rng.uniform(int8_blocks::num_blocks(n), -20.0f, 20.0f);
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] *= std::exp2(e[static_cast<std::size_t>(i / kBlock)]);
  return v;
}

struct Packed {
  std::vector<std::int32_t> words;
  float scale(std::int64_t b) const { return std::bit_cast<float>(words[static_cast<std::size_t>(b)]); }
};

Packed quantize(std::vector<float>& x) {
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  Packed p{std::vector<std::int32_t>(static_cast<std::size_t>(int8_blocks::packed_words(n)), -1)};
  cpu::quantize_int8_blocks(cpu_ctx(), view_of(x, Shape{n}), view_of(p.words, Shape{int8_blocks::packed_words(n)}));
  return p;
}

std::vector<float> dequantize(Packed& p, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n), -7.0f);
  cpu::dequantize_int8_blocks(cpu_ctx(), view_of(p.words, Shape{int8_blocks::packed_words(n)}), view_of(out, Shape{n}),
                              false);
  return out;
}

TEST(Int8Blocks, ScalesAndErrorsFollowTheRule) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 3, 255, 256, 257, 1000, 4099}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    std::vector<float> x = scaled_inputs(rng, n);
    Packed p = quantize(x);
    const std::vector<float> back = dequantize(p, n);
    for (std::int64_t b = 0; b < int8_blocks::num_blocks(n); ++b) {
      double absmax = 0.0;
      for (std::int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        absmax = std::max(absmax, std::fabs(static_cast<double>(x[static_cast<std::size_t>(i)])));
      }
      const double scale = p.scale(b);
      // Half a step, plus what the rule's fp32 roundings may add: x / scale (|x / scale| <= 127 steps,
      // so up to 127 * 2^-24 of a step, which can put rint on the far side of a half), the scale itself
      // (a clamp at 127 then misses by as much) and code * scale (as much again). 1e-45: denormal scales.
      const double rounding_slack = 3 * 127 * std::ldexp(1.0, -24) * scale + 1e-45;
      EXPECT_NEAR(scale, absmax / 127.0, absmax / 127.0 * 1e-7) << "block " << b;
      int at_max = 0;
      for (std::int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        const double v = x[static_cast<std::size_t>(i)], got = back[static_cast<std::size_t>(i)];
        ASSERT_LE(std::fabs(got - v), 0.5 * scale + rounding_slack) << "element " << i;
        if (std::fabs(v) == absmax) at_max += std::fabs(std::fabs(got) / scale - 127.0) < 1e-4;
      }
      EXPECT_GE(at_max, 1) << "block " << b << ": its largest magnitude is 127 steps";
    }
    // The codes' padding to a whole word is zero (what crosses the wire is fully defined).
    const auto* codes = reinterpret_cast<const std::int8_t*>(p.words.data() + int8_blocks::num_blocks(n));
    for (std::int64_t i = n; i < (n + 3) / 4 * 4; ++i) EXPECT_EQ(codes[i], 0);
  }
}

// A value half-way between two codes rounds to the even one (rint), as the CUDA twin's rintf
// does, so the two encode the same codes (quantized collectives' bits do not depend on the device).
// Random values never land on a tie; a block whose largest magnitude is 127 (scale exactly 1) puts
// them there.
TEST(Int8Blocks, TiesRoundToTheEvenCode) {
  std::vector<float> x = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.5f, -126.5f};
  Packed p = quantize(x);
  ASSERT_EQ(p.scale(0), 1.0f);
  EXPECT_EQ(dequantize(p, static_cast<std::int64_t>(x.size())),
            (std::vector<float>{127.0f, 0.0f, 2.0f, 2.0f, 0.0f, -2.0f, 4.0f, -126.0f}));
}

TEST(Int8Blocks, ZeroAndNonFiniteBlocks) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 4 * kBlock;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = rng.normal(n);
    for (std::int64_t i = 0; i < kBlock; ++i) x[static_cast<std::size_t>(i)] = 0.0f;  // block 0: zeros
    x[2 * kBlock + 17] = bad;                                                         // block 2: poisoned
    Packed p = quantize(x);
    const std::vector<float> back = dequantize(p, n);
    EXPECT_EQ(p.scale(0), 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      const float got = back[static_cast<std::size_t>(i)];
      if (i / kBlock == 2) {
        ASSERT_TRUE(std::isnan(got)) << "element " << i << " of the block holding " << bad;
      } else {
        ASSERT_TRUE(std::isfinite(got)) << "element " << i;
        if (i < kBlock) {
          ASSERT_EQ(got, 0.0f);
        }
      }
    }
  }
}

TEST(Int8Blocks, Bf16InputAccumulateAndBf16Output) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 3 * kBlock + 5;
  std::vector<float> x = scaled_inputs(rng, n);
  std::vector<bf16> xh(x.size());
  std::vector<float> widened(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    xh[i] = float_to_bf16(x[i]);
    widened[i] = bf16_to_float(xh[i]);
  }
  const std::int64_t words = int8_blocks::packed_words(n);
  std::vector<std::int32_t> from_bf16(static_cast<std::size_t>(words));
  cpu::quantize_int8_blocks(cpu_ctx(), view_of(xh, Shape{n}), view_of(from_bf16, Shape{words}));
  Packed from_widened = quantize(widened);
  EXPECT_TRUE(bitwise_equal(from_bf16, from_widened.words)) << "BF16 quantizes its exact fp32 values";

  const std::vector<float> plain = dequantize(from_widened, n);
  std::vector<float> acc = rng.normal(n), want(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) want[i] = acc[i] + plain[i];
  cpu::dequantize_int8_blocks(cpu_ctx(), view_of(from_widened.words, Shape{words}), view_of(acc, Shape{n}), true);
  EXPECT_TRUE(bitwise_equal(acc, want)) << "accumulate adds what the plain form writes";

  std::vector<bf16> out(x.size());
  cpu::dequantize_int8_blocks(cpu_ctx(), view_of(from_widened.words, Shape{words}), view_of(out, Shape{n}), false);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].bits, float_to_bf16(plain[i]).bits) << i;
}

TEST(Int8Blocks, RejectsAWrongPackedSize) {
  std::vector<float> x(300, 1.0f);
  std::vector<std::int32_t> small(static_cast<std::size_t>(int8_blocks::packed_words(300) - 1));
  EXPECT_THROW(cpu::quantize_int8_blocks(cpu_ctx(), view_of(x, Shape{300}),
                                         view_of(small, Shape{static_cast<std::int64_t>(small.size())})),
               std::exception);
}

// A rank's empty share of a small tensor: no values, no words, null pointers (memset and memcpy must
// not be handed those even for 0 bytes: an ASan/UBSan build of the MPI tests reported it).
TEST(Int8Blocks, AnEmptyChunkIsNoWork) {
  const TensorView none{nullptr, DType::kF32, Device::kCPU, Shape{0}};
  const TensorView no_words{nullptr, DType::kI32, Device::kCPU, Shape{0}};
  EXPECT_NO_THROW(cpu::quantize_int8_blocks(cpu_ctx(), none, no_words));
  EXPECT_NO_THROW(cpu::dequantize_int8_blocks(cpu_ctx(), no_words, none, false));
  EXPECT_NO_THROW(cpu::dequantize_int8_blocks(cpu_ctx(), no_words, none, true));
}

}  // namespace
}  // namespace zt::test
