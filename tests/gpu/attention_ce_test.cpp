// CUDA attention (cuBLASLt + fused causal softmax) and softmax-cross-entropy against the CPU
// kernels (label gpu). Attention in fp32: products over hs and T (<= 130) terms and a softmax whose
// sums differ in order: 1e-5 normwise for att and out; the backward chains three products and the
// softmax backward: 5e-5. Cross-entropy: the CPU sums exp in fp64, the GPU each group's exponentials
// (2^(x log2 e - max log2 e), ~2 ulp) in fp32 and the groups in fp64, so probabilities and losses
// differ by a few ulps: 1e-5, on both the float4 and the single-float row paths
// (aligned and one-float-offset views). Padded vocabulary columns must be exactly 0, and
// att must be exactly 0 above the diagonal (poisoned outputs would leave NaN there).
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaAttention = GpuKernelTest;
using CudaCrossEntropy = GpuKernelTest;

TEST_F(CudaAttention, ForwardBackwardMatchCpuAndRepeatBitwise) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, NH, hs;
  };
  for (auto [B, T, NH, hs] : {S{1, 1, 1, 8}, S{2, 7, 3, 5}, S{2, 130, 4, 16}, S{1, 64, 12, 64}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " NH=" << NH << " hs=" << hs);
    const std::int64_t C = NH * hs;
    std::vector<float> qkv = rng.normal(B * T * 3 * C), dout = rng.normal(B * T * C);
    std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(qkv.size());
    const int nh = static_cast<int>(NH);
    cpu::attention_forward(cpu_ctx(), view_of(out, Shape{B, T, C}), view_of(att, Shape{B, NH, T, T}),
                           view_of(qkv, Shape{B, T, 3 * C}), nh);
    cpu::attention_backward(cpu_ctx(), view_of(dqkv, Shape{B, T, 3 * C}), view_of(dout, Shape{B, T, C}),
                            view_of(qkv, Shape{B, T, 3 * C}), view_of(att, Shape{B, NH, T, T}), nh);
    Buffer gqkv = upload(qkv), gdout = upload(dout);
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
      Buffer go = poisoned(DType::kF32, B * T * C), gatt = poisoned(DType::kF32, B * NH * T * T),
             gdq = poisoned(DType::kF32, B * T * 3 * C);
      cuda::attention_forward(gpu(), go.view(Shape{B, T, C}), gatt.view(Shape{B, NH, T, T}),
                              gqkv.view(Shape{B, T, 3 * C}), nh);
      cuda::attention_backward(gpu(), gdq.view(Shape{B, T, 3 * C}), gdout.view(Shape{B, T, C}),
                               gqkv.view(Shape{B, T, 3 * C}), gatt.view(Shape{B, NH, T, T}), nh);
      const auto o = download<float>(go), a = download<float>(gatt), dq = download<float>(gdq);
      EXPECT_TRUE(close_normwise(o, to_double(out), 1e-5)) << "out";
      EXPECT_TRUE(close_normwise(a, to_double(att), 1e-5)) << "att";
      EXPECT_TRUE(close_normwise(dq, to_double(dqkv), 5e-5)) << "dqkv";
      for (std::int64_t r = 0; r < B * NH * T; ++r)
        for (std::int64_t k = r % T + 1; k < T; ++k) ASSERT_EQ(a[r * T + k], 0.0f) << "above the diagonal";
      const std::vector<float> all = concat({o, a, dq});
      if (run == 0)
        first = all;
      else
        EXPECT_TRUE(bitwise_equal(all, first)) << "two runs differ";
    }
  }
}

// Dropout on the probabilities draws the CPU's mask, so the GPU drops the same entries; the
// results then differ only as without dropout (same tolerances). att keeps the undropped values.
TEST_F(CudaAttention, DropoutOnProbabilitiesMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, NH, hs;
  };
  for (auto [B, T, NH, hs] : {S{2, 7, 3, 5}, S{3, 64, 4, 16}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " NH=" << NH << " hs=" << hs);
    const std::int64_t C = NH * hs;
    const int nh = static_cast<int>(NH);
    const DropoutSpec drop{0.2f, /*seed=*/99, /*site=*/4, /*first_sample=*/(std::int64_t{1} << 32) + 17};
    std::vector<float> qkv = rng.normal(B * T * 3 * C), dout = rng.normal(B * T * C);
    std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(qkv.size()), out_nodrop(B * T * C);
    const Shape sq{B, T, 3 * C}, so{B, T, C}, sa{B, NH, T, T};
    cpu::attention_forward(cpu_ctx(), view_of(out, so), view_of(att, sa), view_of(qkv, sq), nh, drop);
    cpu::attention_backward(cpu_ctx(), view_of(dqkv, sq), view_of(dout, so), view_of(qkv, sq), view_of(att, sa), nh,
                            drop);
    std::vector<float> att_nodrop(att.size());
    cpu::attention_forward(cpu_ctx(), view_of(out_nodrop, so), view_of(att_nodrop, sa), view_of(qkv, sq), nh);
    ASSERT_FALSE(close_normwise(out, to_double(out_nodrop), 1e-2)) << "the reference did not drop anything";
    Buffer gqkv = upload(qkv), gdout = upload(dout);
    Buffer go = poisoned(DType::kF32, B * T * C), gatt = poisoned(DType::kF32, B * NH * T * T),
           gdq = poisoned(DType::kF32, B * T * 3 * C);
    cuda::attention_forward(gpu(), go.view(so), gatt.view(sa), gqkv.view(sq), nh, drop);
    cuda::attention_backward(gpu(), gdq.view(sq), gdout.view(so), gqkv.view(sq), gatt.view(sa), nh, drop);
    EXPECT_TRUE(close_normwise(download<float>(go), to_double(out), 1e-5)) << "out";
    EXPECT_TRUE(close_normwise(download<float>(gatt), to_double(att_nodrop), 1e-5)) << "att (before dropout)";
    EXPECT_TRUE(close_normwise(download<float>(gdq), to_double(dqkv), 5e-5)) << "dqkv";
  }
}

// Vp % 4 == 0 (8, 64, 1024, 50304) takes the float4 path at offset 0, with V inside a group at 5
// and 7 (masked columns in a loaded group); Vp = 1, 15, 37 and offset 1 (every operand one float
// off alignment) the single-float one.
TEST_F(CudaCrossEntropy, ForwardBackwardAndFusedMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, V, Vp] : kCrossEntropyShapes) {
    for (std::int64_t off : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " V=" << V << " Vp=" << Vp << " offset=" << off);
      std::vector<float> logits = rng.normal(N * Vp, 0.0f, 4.0f);
      // Padded columns far above every live logit: one that entered a row's max or sum would show.
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t v = V; v < Vp; ++v) logits[static_cast<std::size_t>(n * Vp + v)] = 1e30f;
      }
      std::vector<std::int32_t> tgt = rng.ints(N, 0, V);
      tgt[N - 1] = V - 1;  // in the row's last live group (partial where V is not a multiple of the group)
      // Row 0 masked where V > 16: columns 0-15 and every 97th (not its target) -inf, so some threads'
      // first values are all -inf: probability 0 there and a finite loss, as on the CPU.
      for (int v = 0; V > 16 && v < V; ++v) {
        if ((v < 16 || v % 97 == 5) && v != tgt[0]) logits[v] = -INFINITY;
      }
      const float dloss = 1.0f / static_cast<float>(N);
      const Shape nv{N, Vp};
      std::vector<float> losses(N), probs(N * Vp), dlogits(N * Vp);
      cpu::softmax_cross_entropy_forward(cpu_ctx(), view_of(losses), view_of(probs, nv), view_of(logits, nv),
                                         view_of(tgt), V);
      cpu::softmax_cross_entropy_backward(cpu_ctx(), view_of(dlogits, nv), view_of(probs, nv), view_of(tgt), dloss, V);
      Buffer gl = upload_at(off, logits), gt = upload(tgt);
      Buffer gloss = poisoned(DType::kF32, N), gp = poisoned(DType::kF32, off + N * Vp),
             gd = poisoned(DType::kF32, off + N * Vp);
      cuda::softmax_cross_entropy_forward(gpu(), gloss.view(), view_at(gp, off, nv), view_at(gl, off, nv), gt.view(),
                                          V);
      cuda::softmax_cross_entropy_backward(gpu(), view_at(gd, off, nv), view_at(gp, off, nv), gt.view(), dloss, V);
      EXPECT_TRUE(close_normwise(download<float>(gloss), to_double(losses), 1e-5)) << "losses";
      const auto p = download_from(gp, off), d = download_from(gd, off);
      EXPECT_TRUE(close_normwise(p, to_double(probs), 1e-5)) << "probs";
      EXPECT_TRUE(close_normwise(d, to_double(dlogits), 1e-5)) << "dlogits";
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t v = V; v < Vp; ++v) {
          ASSERT_EQ(p[n * Vp + v], 0.0f) << "padded column";
          ASSERT_EQ(d[n * Vp + v], 0.0f) << "padded column";
        }
      }
      // Fused, in place on the logits: same losses and gradient.
      Buffer gloss2 = poisoned(DType::kF32, N);
      cuda::softmax_cross_entropy_fused(gpu(), gloss2.view(), view_at(gl, off, nv), view_at(gl, off, nv), gt.view(),
                                        dloss, V);
      EXPECT_TRUE(close_normwise(download<float>(gloss2), to_double(losses), 1e-5)) << "fused losses";
      const auto fused = download_from(gl, off);
      EXPECT_TRUE(close_normwise(fused, to_double(dlogits), 1e-5)) << "fused dlogits";
      for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t v = V; v < Vp; ++v) ASSERT_EQ(fused[n * Vp + v], 0.0f) << "fused padded column";
      }
    }
  }
}

}  // namespace
}  // namespace zt::test
