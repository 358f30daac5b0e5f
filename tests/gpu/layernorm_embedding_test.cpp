// CUDA LayerNorm (plain and residual-fused) and embeddings against the CPU kernels (label gpu).
// LayerNorm sums rows in a different fixed order (warp lanes, not the CPU's 16 lanes): fp32 sums of
// C terms differ by ~sqrt(C) ulp, so 1e-5 normwise for outputs and the row-chunked parameter
// gradients (N <= 4k rows). Embeddings add in exactly the CPU's order: bitwise equal.
// Shapes include C not a multiple of 32 or 4 and N not a multiple of the 32-row chunk.
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/layernorm.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaLayerNorm = GpuKernelTest;
using CudaEmbedding = GpuKernelTest;

struct LnShape {
  std::int64_t N, C;
};
const LnShape kLnShapes[] = {{1, 1}, {5, 37}, {33, 768}, {4099, 100}};

TEST_F(CudaLayerNorm, ForwardAndResidualFusedMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    std::vector<float> a = rng.normal(N * C, 2.0f, 3.0f), b = rng.normal(N * C), w = rng.normal(C), bias = rng.normal(C);
    std::vector<float> x(a.size()), out(a.size()), mean(N), rstd(N);
    cpu::residual_forward(cpu_ctx(), view_of(x), view_of(a), view_of(b));
    cpu::layernorm_forward(cpu_ctx(), view_of(out), view_of(mean), view_of(rstd), view_of(x), view_of(w), view_of(bias));
    Buffer da = upload(a), db = upload(b), dx = upload(x), dw = upload(w), dbias = upload(bias);
    Buffer o = poisoned(DType::kF32, N * C), m = poisoned(DType::kF32, N), r = poisoned(DType::kF32, N);
    cuda::layernorm_forward(gpu(), o.view(), m.view(), r.view(), dx.view(), dw.view(), dbias.view());
    EXPECT_TRUE(close_normwise(download<float>(o), to_double(out), 1e-5));
    EXPECT_TRUE(close_normwise(download<float>(m), to_double(mean), 1e-5));
    EXPECT_TRUE(close_normwise(download<float>(r), to_double(rstd), 1e-5));
    Buffer res = poisoned(DType::kF32, N * C), o2 = poisoned(DType::kF32, N * C);
    cuda::layernorm_residual_forward(gpu(), res.view(), o2.view(), m.view(), r.view(), da.view(), db.view(), dw.view(),
                                     dbias.view());
    EXPECT_TRUE(bitwise_equal(download<float>(res), x));
    EXPECT_TRUE(close_normwise(download<float>(o2), to_double(out), 1e-5));
  }
}

TEST_F(CudaLayerNorm, BackwardMatchesCpuAndRepeatsBitwise) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    std::vector<float> x = rng.normal(N * C, 1.0f, 2.0f), w = rng.normal(C), bias = rng.normal(C), g = rng.normal(N * C);
    std::vector<float> out(x.size()), mean(N), rstd(N);
    cpu::layernorm_forward(cpu_ctx(), view_of(out), view_of(mean), view_of(rstd), view_of(x), view_of(w), view_of(bias));
    // Gradients accumulate: start from non-zero values on both sides.
    std::vector<float> dx = rng.normal(N * C), dw = rng.normal(C), db = rng.normal(C);
    Buffer gdx = upload(dx), gdw = upload(dw), gdb = upload(db);
    Buffer gx = upload(x), gw = upload(w), gg = upload(g), gm = upload(mean), gr = upload(rstd);
    cpu::layernorm_backward(cpu_ctx(), view_of(dx), view_of(dw), view_of(db), view_of(g), view_of(x), view_of(w),
                            view_of(mean), view_of(rstd));
    cuda::layernorm_backward(gpu(), gdx.view(), gdw.view(), gdb.view(), gg.view(), gx.view(), gw.view(), gm.view(),
                             gr.view());
    const auto got_dx = download<float>(gdx), got_dw = download<float>(gdw), got_db = download<float>(gdb);
    EXPECT_TRUE(close_normwise(got_dx, to_double(dx), 1e-5));
    EXPECT_TRUE(close_normwise(got_dw, to_double(dw), 1e-5));
    EXPECT_TRUE(close_normwise(got_db, to_double(db), 1e-5));
    // A second run from zeroed gradients twice: bitwise identical.
    std::vector<float> zeros_nc(N * C), zeros_c(C);
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
      Buffer a = upload(zeros_nc), bw = upload(zeros_c), bb = upload(zeros_c);
      cuda::layernorm_backward(gpu(), a.view(), bw.view(), bb.view(), gg.view(), gx.view(), gw.view(), gm.view(),
                               gr.view());
      std::vector<float> all = download<float>(a);
      for (float f : download<float>(bw)) all.push_back(f);
      for (float f : download<float>(bb)) all.push_back(f);
      if (run == 0) first = all;
      else EXPECT_TRUE(bitwise_equal(all, first));
    }
  }
}

TEST_F(CudaEmbedding, ForwardAndDeterministicBackwardMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  struct Shape4 { std::int64_t B, T, C, V; };
  for (auto [B, T, C, V] : {Shape4{1, 1, 1, 1}, Shape4{2, 7, 37, 5}, Shape4{4, 64, 768, 50}, Shape4{3, 129, 64, 1000}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " C=" << C << " V=" << V);
    std::vector<std::int32_t> tok = rng.ints(B * T, 0, static_cast<std::int32_t>(V));  // small V: many repeats
    std::vector<float> wte = rng.normal(V * C), wpe = rng.normal((T + 3) * C), g = rng.normal(B * T * C);
    std::vector<float> out(B * T * C);
    cpu::embedding_forward(cpu_ctx(), view_of(out, Shape{B, T, C}), view_of(tok, Shape{B, T}), view_of(wte, Shape{V, C}),
                           view_of(wpe, Shape{T + 3, C}));
    Buffer dtok = upload(tok), dwte = upload(wte), dwpe = upload(wpe), dg = upload(g);
    Buffer o = poisoned(DType::kF32, B * T * C);
    cuda::embedding_forward(gpu(), o.view(Shape{B, T, C}), dtok.view(Shape{B, T}), dwte.view(Shape{V, C}),
                            dwpe.view(Shape{T + 3, C}));
    EXPECT_TRUE(bitwise_equal(download<float>(o), out));
    std::vector<float> gte = rng.normal(V * C), gpe = rng.normal((T + 3) * C);  // accumulate onto these
    Buffer ggte = upload(gte), ggpe = upload(gpe);
    cpu::embedding_backward(cpu_ctx(), view_of(gte, Shape{V, C}), view_of(gpe, Shape{T + 3, C}),
                            view_of(g, Shape{B, T, C}), view_of(tok, Shape{B, T}));
    cuda::embedding_backward(gpu(), ggte.view(Shape{V, C}), ggpe.view(Shape{T + 3, C}), dg.view(Shape{B, T, C}),
                             dtok.view(Shape{B, T}));
    EXPECT_TRUE(bitwise_equal(download<float>(ggte), gte));
    EXPECT_TRUE(bitwise_equal(download<float>(ggpe), gpe));
  }
}

}  // namespace
}  // namespace zt::test
