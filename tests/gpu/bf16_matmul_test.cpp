// CUDA matmul with BF16 activation operands against the CPU kernel called with the same BF16
// operands on the host (label gpu), within tests/gpu/bf16_bound.h's bound; attention:
// bf16_matmul_attention_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cuda/matmul.h"
#include "tests/gpu/bf16_bound.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaBf16MatmulAttention = GpuKernelTest;
using zt::WeightLayout;

TEST_F(CudaBf16MatmulAttention, MatmulForwardBackwardMatchCpuOnBf16Operands) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t N, C, OC;
  };
  // 4100 x 2048: the fp32 scratch of a biased bf16 product (32 MiB, matmul.cu) takes four row
  // chunks, as GPT-2's c_fc does in training.
  for (auto [N, C, OC] : {S{1, 8, 8}, S{7, 24, 40}, S{129, 96, 136}, S{300, 768, 72}, S{4100, 256, 2048}}) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << "N=" << N << " C=" << C << " OC=" << OC << " layout "
                     << (layout == WeightLayout::kInOut ? "in_out" : "out_in") << (with_bias ? " bias" : " no bias"));
        const Shape sx{N, C}, so{N, OC}, sw = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
        // Weights and bias are fp32 and not bf16 values: both sides must round the weight themselves.
        std::vector<float> w = rng.normal(C * OC, 0.0f, 0.05f), b = rng.normal(OC);
        std::vector<bf16> x = rounded(rng.normal(N * C)), g = rounded(rng.normal(N * OC));
        // dweight and dbias accumulate (+=) onto what is there.
        std::vector<float> dw = rng.normal(C * OC, 0.0f, 0.1f), db = rng.normal(OC, 0.0f, 0.1f);
        const std::vector<float> dw0 = dw, db0 = db;
        std::vector<bf16> out(N * OC), dx(N * C);
        TensorView bias_view = with_bias ? view_of(b) : TensorView{};
        cpu::matmul_forward(cpu_ctx(), view_of(out, so), view_of(x, sx), view_of(w, sw), layout, bias_view);
        cpu::matmul_backward(cpu_ctx(), view_of(dx, sx), view_of(dw, sw), with_bias ? view_of(db) : TensorView{},
                             view_of(g, so), view_of(x, sx), view_of(w, sw), layout);
        Buffer gx = upload_as(DType::kBF16, x), gg = upload_as(DType::kBF16, g), gw = upload(w), gb = upload(b);
        Buffer o = poisoned(DType::kBF16, N * OC), gdx = poisoned(DType::kBF16, N * C);
        Buffer gdw = upload(dw0), gdb = upload(db0);
        cuda::matmul_forward(gpu(), o.view(so), gx.view(sx), gw.view(sw), layout, with_bias ? gb.view() : TensorView{});
        cuda::matmul_backward(gpu(), gdx.view(sx), gdw.view(sw), with_bias ? gdb.view() : TensorView{}, gg.view(so),
                              gx.view(sx), gw.view(sw), layout);
        // fp32 tolerances of tests/gpu/matmul_test.cpp: summation order only.
        EXPECT_TRUE(within_bound(download_f32(o), widened(out), 1e-5)) << "out";
        EXPECT_TRUE(within_bound(download_f32(gdx), widened(dx), 1e-5)) << "dinp";
        EXPECT_TRUE(within_bound(download<float>(gdw), dw, 1e-5)) << "dweight (fp32, accumulated)";
        if (with_bias) {
          EXPECT_TRUE(within_bound(download<float>(gdb), db, 1e-5)) << "dbias (fp32, accumulated)";
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt::test
