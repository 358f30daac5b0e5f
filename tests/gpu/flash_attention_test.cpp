// The flash-style attention kernels against the CPU attention (label gpu): out and dqkv as the
// cuBLASLt path's test bounds them (fp32, sums in another order: 1e-5 forward, 5e-5 backward), the
// log-sum-exp against an fp64 host computation (1e-5), every output element written (poisoned
// buffers), bitwise repeatable, at head sizes 8-128 and T that are not multiples of the tiles,
// with and without dropout on the probabilities (the CPU's mask, fused into the kernels), with
// multi-head and grouped-query heads.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cuda/flash_attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaFlashAttention = GpuKernelTest;

// log sum_j<=i exp(q_i . k_j / sqrt(hs)) per (b, h, i), in fp64; query head h reads key head
// h / (NH / NKV) of the [B, T, (NH + 2 NKV) hs] rows.
std::vector<double> reference_lse(const std::vector<float>& qkv, std::int64_t B, std::int64_t T, std::int64_t NH,
                                  std::int64_t hs, std::int64_t NKV) {
  const std::int64_t C = NH * hs, W = (NH + 2 * NKV) * hs;
  std::vector<double> out(static_cast<std::size_t>(B * NH * T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t i = 0; i < T; ++i) {
        std::vector<double> s(static_cast<std::size_t>(i + 1));
        double mx = -INFINITY;
        for (std::int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (std::int64_t d = 0; d < hs; ++d) {
            dot += static_cast<double>(qkv[(b * T + i) * W + h * hs + d]) *
                   qkv[(b * T + j) * W + C + h / (NH / NKV) * hs + d];
          }
          s[j] = dot / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (double v : s) sum += std::exp(v - mx);
        out[(b * NH + h) * T + i] = mx + std::log(sum);
      }
  return out;
}

// lse's error is that of the scores it sums, absolute (~1e-6 of their size): bounded against
// max(1, max |lse|), since a lone row (T = 1) near zero would make a relative bound a coin toss.
::testing::AssertionResult close_lse(const std::vector<float>& got, const std::vector<double>& ref) {
  double scale = 1.0;
  for (double v : ref) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!(std::abs(got[i] - ref[i]) <= 1e-5 * scale)) {
      return ::testing::AssertionFailure() << "lse[" << i << "] = " << got[i] << ", reference " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(CudaFlashAttention, ForwardBackwardMatchCpuAndRepeatBitwise) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, NH, hs, NKV;
  };
  const DropoutSpec no_drop{}, drop{0.2f, /*seed=*/99, /*site=*/4, /*first_sample=*/(std::int64_t{1} << 32) + 17};
  for (const DropoutSpec* spec : {&no_drop, &drop}) {
    // Multi-head, then grouped-query heads (two query heads per key/value head; one for all).
    for (auto [B, T, NH, hs, NKV] : {S{1, 1, 1, 8, 1}, S{2, 67, 3, 16, 3}, S{2, 130, 4, 32, 4}, S{1, 200, 2, 64, 2},
                                     S{1, 70, 2, 128, 2}, S{2, 67, 4, 16, 2}, S{1, 90, 4, 32, 1}}) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " NH=" << NH << " NKV=" << NKV << " hs=" << hs
                                        << (spec->active() ? " dropout" : ""));
      ASSERT_TRUE(cuda::flash_attention_supports(B, NH, hs));
      const std::int64_t C = NH * hs, W = (NH + 2 * NKV) * hs;
      std::vector<float> qkv = rng.normal(B * T * W), dout = rng.normal(B * T * C);
      std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(qkv.size());
      const int nh = static_cast<int>(NH), nkv = static_cast<int>(NKV);
      cpu::attention_forward(cpu_ctx(), view_of(out, Shape{B, T, C}), view_of(att, Shape{B, NH, T, T}),
                             view_of(qkv, Shape{B, T, W}), nh, *spec, nkv);
      cpu::attention_backward(cpu_ctx(), view_of(dqkv, Shape{B, T, W}), view_of(dout, Shape{B, T, C}),
                              view_of(qkv, Shape{B, T, W}), view_of(att, Shape{B, NH, T, T}), nh, *spec, nkv);
      const std::vector<double> lse_ref = reference_lse(qkv, B, T, NH, hs, NKV);
      Buffer gqkv = upload(qkv), gdout = upload(dout);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Buffer go = poisoned(DType::kF32, B * T * C), glse = poisoned(DType::kF32, B * NH * T),
               gdq = poisoned(DType::kF32, B * T * W);
        cuda::flash_attention_forward(gpu(), go.view(Shape{B, T, C}), glse.view(Shape{B, NH, T}),
                                      gqkv.view(Shape{B, T, W}), nh, *spec, nkv);
        cuda::flash_attention_backward(gpu(), gdq.view(Shape{B, T, W}), gdout.view(Shape{B, T, C}),
                                       go.view(Shape{B, T, C}), gqkv.view(Shape{B, T, W}), glse.view(Shape{B, NH, T}),
                                       nh, *spec, nkv);
        const auto o = download<float>(go), l = download<float>(glse), dq = download<float>(gdq);
        EXPECT_TRUE(close_normwise(o, to_double(out), 1e-5)) << "out";
        EXPECT_TRUE(close_lse(l, lse_ref)) << "lse";
        EXPECT_TRUE(close_normwise(dq, to_double(dqkv), 5e-5)) << "dqkv";
        const std::vector<float> all = concat({o, l, dq});
        if (run == 0)
          first = all;
        else
          EXPECT_TRUE(bitwise_equal(all, first)) << "two runs differ";
      }
    }
  }
}

TEST_F(CudaFlashAttention, UnsupportedShapesAreRefused) {
  EXPECT_FALSE(cuda::flash_attention_supports(1, 1, 5));
  EXPECT_FALSE(cuda::flash_attention_supports(65536, 1, 64));
  EXPECT_TRUE(cuda::flash_attention_supports(5461, 12, 64));
  Buffer qkv = poisoned(DType::kF32, 2 * 4 * 3 * 10), out = poisoned(DType::kF32, 2 * 4 * 10),
         lse = poisoned(DType::kF32, 2 * 2 * 4);
  EXPECT_THROW(cuda::flash_attention_forward(gpu(), out.view(Shape{2, 4, 10}), lse.view(Shape{2, 2, 4}),
                                             qkv.view(Shape{2, 4, 30}), 2),
               InternalError);
}

}  // namespace
}  // namespace zt::test
