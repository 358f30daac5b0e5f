// Attention over a key/value cache (kernels/cpu/cached_attention, decoding) against the whole
// window's attention_forward: a cache of P positions whose last Tq are new gives the last Tq rows
// of the whole window's out, within 1e-6 normwise in fp32 (the scores' dot products summed in
// another order) and within one bf16 rounding for bf16 activations; multi-head
// and grouped-query heads, one or several new positions, several samples; bitwise for any thread
// count; bad operands refused. And RoPE from a first position turns rows as the whole sequence's
// forward turns them there, bit for bit.
#include <cstring>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cached_attention.h"
#include "kernels/cpu/rope.h"

namespace zt::cpu {
namespace {

using test::cpu_ctx;
using test::view_of;

struct Shape4 {
  std::int64_t B, P, Tq;
  int NH, NKV, hs;
  std::int64_t W() const { return static_cast<std::int64_t>(NH + 2 * NKV) * hs; }
  std::int64_t C() const { return static_cast<std::int64_t>(NH) * hs; }
};

// The whole window's out rows [P - Tq, P) of each sample.
std::vector<float> last_rows(const std::vector<float>& whole, const Shape4& s) {
  std::vector<float> rows;
  for (std::int64_t b = 0; b < s.B; ++b) {
    const auto first = whole.begin() + (b * s.P + s.P - s.Tq) * s.C();
    rows.insert(rows.end(), first, first + s.Tq * s.C());
  }
  return rows;
}

std::vector<float> rounded(std::vector<float> x) {
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));
  return x;
}

std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = float_to_bf16(x[i]);
  return out;
}

TEST(CachedAttention, TheLastRowsOfTheWholeWindowsAttention) {
  ZT_SEEDED_RNG(rng);
  for (const Shape4 s : {Shape4{1, 1, 1, 2, 2, 8}, Shape4{1, 17, 1, 4, 4, 16}, Shape4{2, 23, 5, 4, 2, 8},
                         Shape4{1, 40, 40, 6, 1, 16}, Shape4{1, 33, 3, 2, 2, 64}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " P=" << s.P << " Tq=" << s.Tq << " NH=" << s.NH
                                      << " NKV=" << s.NKV << " hs=" << s.hs);
    const std::int64_t W = s.W(), C = s.C();
    const std::vector<float> qkv = rounded(rng.normal(s.B * s.P * W));  // bf16-exact, for the bf16 case
    std::vector<float> cache = qkv, whole(s.B * s.P * C), att(s.B * s.NH * s.P * s.P);
    attention_forward(cpu_ctx(), view_of(whole, {s.B, s.P, C}), view_of(att, {s.B, s.NH, s.P, s.P}),
                      view_of(cache, {s.B, s.P, W}), s.NH, {}, s.NKV);
    const std::vector<float> want = last_rows(whole, s);
    std::vector<float> out(s.B * s.Tq * C, NAN), out1(out.size(), NAN);
    cached_attention_forward(cpu_ctx(), view_of(out, {s.B, s.Tq, C}), view_of(cache, {s.B, s.P, W}), s.NH, s.NKV);
    EXPECT_TRUE(test::close_normwise(out, test::to_double(want), 1e-6));
    cached_attention_forward(cpu_ctx(1), view_of(out1, {s.B, s.Tq, C}), view_of(cache, {s.B, s.P, W}), s.NH, s.NKV);
    EXPECT_TRUE(test::bitwise_equal(out, out1)) << "one thread";

    // bf16: the fp32 result rounded once, so within one bf16 step of the whole window's.
    std::vector<bf16> cache16 = to_bf16(qkv), out16(out.size());
    cached_attention_forward(cpu_ctx(), TensorView{out16.data(), DType::kBF16, Device::kCPU, Shape{s.B, s.Tq, C}},
                             TensorView{cache16.data(), DType::kBF16, Device::kCPU, Shape{s.B, s.P, W}}, s.NH, s.NKV);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(bf16_to_float(out16[i]), want[i], std::abs(want[i]) / 128.0 + 1e-6) << i;
    }
  }
}

TEST(CachedAttention, BadOperandsAreRefused) {
  std::vector<float> cache(1 * 4 * 24), out(1 * 2 * 8), out5(1 * 5 * 8);
  std::vector<bf16> out16(out.size());
  EXPECT_NO_THROW(cached_attention_forward(cpu_ctx(), view_of(out, {1, 2, 8}), view_of(cache, {1, 4, 24}), 2));
  EXPECT_THROW(cached_attention_forward(cpu_ctx(), view_of(out5, {1, 5, 8}), view_of(cache, {1, 4, 24}), 2),
               std::exception);  // more new positions than the cache holds
  EXPECT_THROW(cached_attention_forward(cpu_ctx(), view_of(out, {1, 2, 8}), view_of(cache, {1, 4, 24}), 3),
               std::exception);  // 24 is not 9 heads
  EXPECT_THROW(cached_attention_forward(cpu_ctx(), view_of(out, {1, 2, 8}), view_of(cache, {4, 24}), 2),
               std::exception);  // not [B, P, W]
  EXPECT_THROW(cached_attention_forward(cpu_ctx(), TensorView{out16.data(), DType::kBF16, Device::kCPU, Shape{1, 2, 8}},
                                        view_of(cache, {1, 4, 24}), 2),
               std::exception);  // two dtypes
}

TEST(Rope, AFirstPositionTurnsRowsAsTheWholeSequenceDoes) {
  ZT_SEEDED_RNG(rng);
  const RopeFrequencies freq{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 64.0f}};
  const std::int64_t P = 37, first = 29, T = P - first;
  const int hs = 16, heads = 3, W = 5 * hs;
  const std::vector<float> x = rounded(rng.normal(P * W));
  std::vector<float> whole = x, rows(x.begin() + first * W, x.end());
  rope_forward(cpu_ctx(), view_of(whole, {1, P, W}), heads, hs, freq);
  rope_forward(cpu_ctx(), view_of(rows, {1, T, W}), heads, hs, freq, first);
  EXPECT_TRUE(test::bitwise_equal(rows, std::vector<float>(whole.begin() + first * W, whole.end())));
  std::vector<bf16> rows16 = to_bf16(std::vector<float>(x.begin() + first * W, x.end()));
  rope_forward(cpu_ctx(), TensorView{rows16.data(), DType::kBF16, Device::kCPU, Shape{1, T, W}}, heads, hs, freq,
               first);
  for (std::int64_t i = 0; i < T * W; ++i) ASSERT_EQ(rows16[i].bits, float_to_bf16(whole[first * W + i]).bits) << i;
}

}  // namespace
}  // namespace zt::cpu
