// Grouped-query attention in kernels/cpu/attention (n_kv_head < n_head, Llama's): against
// multi-head attention on the same q with each kv head repeated for its query heads (what
// Hugging Face's repeat_kv does): out, att and dq bitwise equal, each kv head's dk and dv
// bitwise the sum of its repeated copies' in head order; with dropout; bitwise for any thread
// count; bad head counts refused.
#include <cstring>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"

namespace zt::cpu {
namespace {

using test::cpu_ctx;
using test::view_of;

struct Gqa {
  std::int64_t B, T;
  int NH, NKV, hs;
  std::int64_t W() const { return static_cast<std::int64_t>(NH + 2 * NKV) * hs; }
  std::int64_t C() const { return static_cast<std::int64_t>(NH) * hs; }
};

// The multi-head qkv [B, T, 3C] with kv head g copied to query heads g*R .. g*R+R-1.
std::vector<float> repeat_kv(const std::vector<float>& qkv, const Gqa& s) {
  const int R = s.NH / s.NKV;
  const std::int64_t C = s.C(), W = s.W();
  std::vector<float> out(static_cast<std::size_t>(s.B * s.T * 3 * C));
  for (std::int64_t r = 0; r < s.B * s.T; ++r) {
    const float* src = qkv.data() + r * W;
    float* dst = out.data() + r * 3 * C;
    std::memcpy(dst, src, C * sizeof(float));  // q
    for (int h = 0; h < s.NH; ++h) {
      const int g = h / R;
      std::memcpy(dst + C + h * s.hs, src + C + g * s.hs, s.hs * sizeof(float));                // k
      std::memcpy(dst + 2 * C + h * s.hs, src + C + (s.NKV + g) * s.hs, s.hs * sizeof(float));  // v
    }
  }
  return out;
}

TEST(AttentionGqa, EqualsMultiHeadAttentionOnRepeatedKvHeads) {
  ZT_SEEDED_RNG(rng);
  for (const Gqa s : {Gqa{2, 9, 4, 2, 8}, Gqa{1, 20, 6, 1, 16}, Gqa{3, 5, 4, 4, 4}}) {
    for (float p : {0.0f, 0.25f}) {
      SCOPED_TRACE(::testing::Message() << "NH=" << s.NH << " NKV=" << s.NKV << " T=" << s.T << " dropout " << p);
      const DropoutSpec drop{p, 77, 3, 5};
      const std::int64_t C = s.C(), W = s.W(), R = s.NH / s.NKV;
      std::vector<float> qkv = rng.normal(s.B * s.T * W), dout = rng.normal(s.B * s.T * C);
      std::vector<float> mha = repeat_kv(qkv, s);
      std::vector<float> out(s.B * s.T * C), att(s.B * s.NH * s.T * s.T), out_m(out.size()), att_m(att.size());
      attention_forward(cpu_ctx(), view_of(out, {s.B, s.T, C}), view_of(att, {s.B, s.NH, s.T, s.T}),
                        view_of(qkv, {s.B, s.T, W}), s.NH, drop, s.NKV);
      attention_forward(cpu_ctx(), view_of(out_m, {s.B, s.T, C}), view_of(att_m, {s.B, s.NH, s.T, s.T}),
                        view_of(mha, {s.B, s.T, 3 * C}), s.NH, drop);
      EXPECT_TRUE(test::bitwise_equal(out, out_m));
      EXPECT_TRUE(test::bitwise_equal(att, att_m));
      std::vector<float> dqkv(qkv.size(), NAN), dqkv_m(mha.size());
      attention_backward(cpu_ctx(), view_of(dqkv, {s.B, s.T, W}), view_of(dout, {s.B, s.T, C}),
                         view_of(qkv, {s.B, s.T, W}), view_of(att, {s.B, s.NH, s.T, s.T}), s.NH, drop, s.NKV);
      attention_backward(cpu_ctx(), view_of(dqkv_m, {s.B, s.T, 3 * C}), view_of(dout, {s.B, s.T, C}),
                         view_of(mha, {s.B, s.T, 3 * C}), view_of(att_m, {s.B, s.NH, s.T, s.T}), s.NH, drop);
      for (std::int64_t r = 0; r < s.B * s.T; ++r) {
        for (std::int64_t c = 0; c < C; ++c) ASSERT_EQ(dqkv[r * W + c], dqkv_m[r * 3 * C + c]) << "dq " << r;
        for (int g = 0; g < s.NKV; ++g) {
          for (int e = 0; e < s.hs; ++e) {
            float dk = 0.0f, dv = 0.0f;  // the repeated copies' sum, in head order
            for (std::int64_t h = g * R; h < (g + 1) * R; ++h) {
              dk += dqkv_m[r * 3 * C + C + h * s.hs + e];
              dv += dqkv_m[r * 3 * C + 2 * C + h * s.hs + e];
            }
            ASSERT_EQ(dqkv[r * W + C + g * s.hs + e], dk) << "dk " << r << " " << g;
            ASSERT_EQ(dqkv[r * W + C + (s.NKV + g) * s.hs + e], dv) << "dv " << r << " " << g;
          }
        }
      }
      // Any thread count: the same bits.
      std::vector<float> dqkv1(qkv.size(), NAN);
      attention_backward(cpu_ctx(1), view_of(dqkv1, {s.B, s.T, W}), view_of(dout, {s.B, s.T, C}),
                         view_of(qkv, {s.B, s.T, W}), view_of(att, {s.B, s.NH, s.T, s.T}), s.NH, drop, s.NKV);
      EXPECT_TRUE(test::bitwise_equal(dqkv1, dqkv));
    }
  }
}

TEST(AttentionGqa, HeadCountsThatDoNotGroupAreRefused) {
  std::vector<float> qkv(2 * 4 * 40), qkv56(2 * 4 * 56), out(2 * 4 * 24), att(2 * 3 * 4 * 4);
  // 3 q heads over 2 kv heads: not a multiple.
  EXPECT_THROW(attention_forward(cpu_ctx(), view_of(out, {2, 4, 24}), view_of(att, {2, 3, 4, 4}),
                                 view_of(qkv56, {2, 4, 56}), 3, {}, 2),
               std::exception);
  // A row of 40 columns is not (3 + 2 * 3) heads of any size.
  EXPECT_THROW(attention_forward(cpu_ctx(), view_of(out, {2, 4, 24}), view_of(att, {2, 3, 4, 4}),
                                 view_of(qkv, {2, 4, 40}), 3, {}, 3),
               std::exception);
}

}  // namespace
}  // namespace zt::cpu
