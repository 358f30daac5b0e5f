// cuda::matmul_residual_forward (label gpu): out = residual + inp @ W + bias with the residual
// added in cuBLASLt's epilogue (beta 1, C the residual), against the CPU's product plus the
// residual, in fp32 and bf16, both layouts, with and without bias, the residual apart from out and
// out itself, and with the timed algorithm search (which times its candidates into out: each rerun
// must write the same out). An F32 bias under BF16 activations takes the two-op fallback. Tolerances
// as tests/gpu/matmul_test.cpp's: 1e-5 in fp32 (summation order), 5e-3 in bf16 (the result's
// rounding, now one instead of two).
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/matmul.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaMatmulResidual = GpuKernelTest;
using zt::WeightLayout;

struct Case {
  std::int64_t N, C, OC;
};
const Case kCases[] = {{7, 24, 40}, {129, 96, 136}, {300, 768, 72}};

// Bias dtype per case: none, the activations' dtype, or F32 under BF16 activations (the fallback).
enum class BiasKind { kNone, kSame, kF32 };

TEST_F(CudaMatmulResidual, MatchesTheProductPlusTheResidual) {
  ZT_SEEDED_RNG(rng);
  for (bool timed : {false, true}) {
    resources_->timed_gemm_search = timed;
    for (auto [N, C, OC] : kCases) {
      for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
        for (DType dt : {DType::kF32, DType::kBF16}) {
          for (BiasKind bias_kind : {BiasKind::kNone, BiasKind::kSame, BiasKind::kF32}) {
            const bool bf = dt == DType::kBF16;
            if (bias_kind == BiasKind::kF32 && !bf) continue;  // kSame covers it
            for (bool in_place : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << "N=" << N << " C=" << C << " OC=" << OC << " layout "
                           << (layout == WeightLayout::kInOut ? "in_out" : "out_in") << " " << dtype_name(dt)
                           << " bias " << static_cast<int>(bias_kind) << (in_place ? " in place" : " apart")
                           << (timed ? " timed search" : ""));
              const Shape wshape = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
              std::vector<float> x = rng.normal(N * C), w = rng.normal(C * OC, 0.0f, 0.05f), b = rng.normal(OC),
                                 r = rng.normal(N * OC, 0.0f, 2.0f);
              if (bf) {  // the values bf16 holds exactly, so both sides start from the same operands
                for (std::vector<float>* v : {&x, &w, &b, &r}) *v = widened(rounded(*v));
              }
              const bool has_bias = bias_kind != BiasKind::kNone;
              std::vector<float> product(N * OC);
              cpu::matmul_forward(cpu_ctx(), view_of(product, Shape{N, OC}), view_of(x, Shape{N, C}),
                                  view_of(w, wshape), layout, has_bias ? view_of(b) : TensorView{});
              std::vector<double> expected(product.size());
              for (std::size_t i = 0; i < product.size(); ++i) expected[i] = double{product[i]} + r[i];

              auto up = [&](const std::vector<float>& v) { return bf ? upload_bf16(v) : upload(v); };
              Buffer gx = up(x), gw = up(w), gr = up(r);
              Buffer gb = bias_kind == BiasKind::kF32 ? upload(b) : up(b);
              Buffer o = in_place ? up(r) : poisoned(dt, N * OC);
              const TensorView bias = has_bias ? gb.view() : TensorView{};
              const TensorView residual = in_place ? o.view(Shape{N, OC}) : gr.view(Shape{N, OC});
              cuda::matmul_residual_forward(gpu(), o.view(Shape{N, OC}), gx.view(Shape{N, C}), gw.view(wshape), layout,
                                            bias, residual);
              const std::vector<float> got = download_f32(o);
              EXPECT_TRUE(close_normwise(got, expected, bf ? 5e-3 : 1e-5)) << "out";
              if (!in_place) {
                EXPECT_TRUE(bitwise_equal(download_f32(gr), r)) << "the residual is read only";
              }
              // Again (a kept algorithm, no search): the same bits.
              Buffer again = in_place ? up(r) : poisoned(dt, N * OC);
              cuda::matmul_residual_forward(gpu(), again.view(Shape{N, OC}), gx.view(Shape{N, C}), gw.view(wshape),
                                            layout, bias, in_place ? again.view(Shape{N, OC}) : residual);
              EXPECT_TRUE(bitwise_equal(download_f32(again), got)) << "a second call";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt::test
