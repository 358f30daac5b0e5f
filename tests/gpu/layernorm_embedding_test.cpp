// CUDA LayerNorm (plain and residual-fused) and embeddings against the CPU kernels (label gpu).
// LayerNorm sums rows in a different fixed order (warp lanes, each over single columns or groups of
// 4, not the CPU's 16 lanes): fp32 sums of C terms differ by ~sqrt(C) ulp on either path, so 1e-5
// normwise for outputs and the row-chunked parameter gradients (N <= 4k rows). Embeddings add in
// exactly the CPU's order on both paths: bitwise equal.
// Shapes include C not a multiple of 32 or 4 and N not a multiple of the 32-row chunk; each runs
// at offset 0 (float4 path where C % 4 == 0) and on views one float off alignment (scalar path).
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
// C % 4 == 0 (12, 768, 100, 2064) takes the float4 path at offset 0; 1, 13 and 37 the single-float one.
// Rows of up to 128 groups are loaded in one batch (whole-row kernels); 2064 takes several.
const LnShape kLnShapes[] = {{1, 1}, {5, 37}, {7, 13}, {65, 12}, {33, 768}, {4099, 100}, {9, 2064}};
// Every device operand starts `offset` elements into its buffer: 1 misaligns them all (scalar path).
constexpr std::int64_t kOffsets[] = {0, 1};

TEST_F(CudaLayerNorm, ForwardAndResidualFusedMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      std::vector<float> a = rng.normal(N * C, 2.0f, 3.0f), b = rng.normal(N * C), w = rng.normal(C),
                         bias = rng.normal(C);
      std::vector<float> x(a.size()), out(a.size()), mean(N), rstd(N);
      const Shape nc{N, C}, n{N}, c{C};
      cpu::residual_forward(cpu_ctx(), view_of(x), view_of(a), view_of(b));
      cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                             view_of(bias));
      Buffer da = upload_at(off, a), db = upload_at(off, b), dx = upload_at(off, x), dw = upload_at(off, w),
             dbias = upload_at(off, bias);
      Buffer o = poisoned(DType::kF32, off + N * C), m = poisoned(DType::kF32, off + N),
             r = poisoned(DType::kF32, off + N);
      cuda::layernorm_forward(gpu(), view_at(o, off, nc), view_at(m, off, n), view_at(r, off, n), view_at(dx, off, nc),
                              view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(close_normwise(download_from(o, off), to_double(out), 1e-5));
      EXPECT_TRUE(close_normwise(download_from(m, off), to_double(mean), 1e-5));
      EXPECT_TRUE(close_normwise(download_from(r, off), to_double(rstd), 1e-5));
      Buffer res = poisoned(DType::kF32, off + N * C), o2 = poisoned(DType::kF32, off + N * C);
      cuda::layernorm_residual_forward(gpu(), view_at(res, off, nc), view_at(o2, off, nc), view_at(m, off, n),
                                       view_at(r, off, n), view_at(da, off, nc), view_at(db, off, nc),
                                       view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(bitwise_equal(download_from(res, off), x));
      EXPECT_TRUE(close_normwise(download_from(o2, off), to_double(out), 1e-5));
      // In place (residual aliases a), as the GPU block calls it: the same results.
      Buffer o3 = poisoned(DType::kF32, off + N * C);
      cuda::layernorm_residual_forward(gpu(), view_at(da, off, nc), view_at(o3, off, nc), view_at(m, off, n),
                                       view_at(r, off, n), view_at(da, off, nc), view_at(db, off, nc),
                                       view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(bitwise_equal(download_from(da, off), x)) << "in place";
      EXPECT_TRUE(bitwise_equal(download_from(o3, off), download_from(o2, off))) << "in place";
    }
  }
}

TEST_F(CudaLayerNorm, BackwardMatchesCpuAndRepeatsBitwise) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      std::vector<float> x = rng.normal(N * C, 1.0f, 2.0f), w = rng.normal(C), bias = rng.normal(C),
                         g = rng.normal(N * C);
      std::vector<float> out(x.size()), mean(N), rstd(N);
      const Shape nc{N, C}, n{N}, c{C};
      cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                             view_of(bias));
      // Gradients accumulate: start from non-zero values on both sides.
      std::vector<float> dx = rng.normal(N * C), dw = rng.normal(C), db = rng.normal(C);
      Buffer gdx = upload_at(off, dx), gdw = upload_at(off, dw), gdb = upload_at(off, db);
      Buffer gx = upload_at(off, x), gw = upload_at(off, w), gg = upload_at(off, g), gm = upload_at(off, mean),
             gr = upload_at(off, rstd);
      cpu::layernorm_backward(cpu_ctx(), view_of(dx, nc), view_of(dw), view_of(db), view_of(g, nc), view_of(x, nc),
                              view_of(w), view_of(mean), view_of(rstd));
      const auto backward = [&](const Buffer& into_dx, const Buffer& into_dw, const Buffer& into_db) {
        cuda::layernorm_backward(gpu(), view_at(into_dx, off, nc), view_at(into_dw, off, c), view_at(into_db, off, c),
                                 view_at(gg, off, nc), view_at(gx, off, nc), view_at(gw, off, c), view_at(gm, off, n),
                                 view_at(gr, off, n));
      };
      backward(gdx, gdw, gdb);
      // dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) cancels terms of size rstd |g w|: at C = 1
      // exactly (xhat = 0, rstd = 1/sqrt(eps) = 316) it is rounding noise of that size (an FMA's
      // unrounded g w against the CPU's rounded one), so the error is judged against the terms.
      double dx_terms = 0.0;
      for (std::int64_t i = 0; i < N * C; ++i) {
        dx_terms = std::max(dx_terms, static_cast<double>(rstd[i / C]) * std::abs(double{g[i]} * w[i % C]));
      }
      EXPECT_TRUE(close_normwise(download_from(gdx, off), to_double(dx), 1e-5, dx_terms));
      EXPECT_TRUE(close_normwise(download_from(gdw, off), to_double(dw), 1e-5));
      EXPECT_TRUE(close_normwise(download_from(gdb, off), to_double(db), 1e-5));
      // A second run from zeroed gradients twice: bitwise identical.
      std::vector<float> zeros_nc(N * C), zeros_c(C);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Buffer a = upload_at(off, zeros_nc), bw = upload_at(off, zeros_c), bb = upload_at(off, zeros_c);
        backward(a, bw, bb);
        const std::vector<float> all = concat({download_from(a, off), download_from(bw, off), download_from(bb, off)});
        if (run == 0)
          first = all;
        else
          EXPECT_TRUE(bitwise_equal(all, first));
      }
      // The warp-a-row kernels (NormBackwardRows::kWarp): the same parameter gradients bit for bit
      // (the same per-column order), dinp within the CPU's bound ([Note: a block a row]).
      Buffer a = upload_at(off, zeros_nc), bw = upload_at(off, zeros_c), bb = upload_at(off, zeros_c);
      cuda::layernorm_backward(gpu(), view_at(a, off, nc), view_at(bw, off, c), view_at(bb, off, c),
                               view_at(gg, off, nc), view_at(gx, off, nc), view_at(gw, off, c), view_at(gm, off, n),
                               view_at(gr, off, n), cuda::NormBackwardRows::kWarp);
      const std::size_t nC = static_cast<std::size_t>(N * C);
      EXPECT_TRUE(bitwise_equal(concat({download_from(bw, off), download_from(bb, off)}),
                                std::vector<float>(first.begin() + static_cast<std::ptrdiff_t>(nC), first.end())))
          << "dweight, dbias: warp a row vs block a row";
      std::vector<float> dx0(nC, 0.0f), dw0(C, 0.0f), db0(C, 0.0f);
      cpu::layernorm_backward(cpu_ctx(), view_of(dx0, nc), view_of(dw0), view_of(db0), view_of(g, nc), view_of(x, nc),
                              view_of(w), view_of(mean), view_of(rstd));
      EXPECT_TRUE(close_normwise(download_from(a, off), to_double(dx0), 1e-5, dx_terms)) << "dinp, warp a row";
    }
  }
}

// C % 4 == 0 (768, 64, 12) takes the float4 path at offset 0; offset 1 and C = 1, 37 the scalar one.
TEST_F(CudaEmbedding, ForwardAndDeterministicBackwardMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  struct Shape4 {
    std::int64_t B, T, C, V;
  };
  for (auto [B, T, C, V] : {Shape4{1, 1, 1, 1}, Shape4{2, 7, 37, 5}, Shape4{3, 5, 12, 4}, Shape4{4, 64, 768, 50},
                            Shape4{3, 129, 64, 1000}}) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " C=" << C << " V=" << V << " offset=" << off);
      std::vector<std::int32_t> tok = rng.ints(B * T, 0, static_cast<std::int32_t>(V));  // small V: many repeats
      std::vector<float> wte = rng.normal(V * C), wpe = rng.normal((T + 3) * C), g = rng.normal(B * T * C);
      std::vector<float> out(B * T * C);
      const Shape btc{B, T, C}, vc{V, C}, pc{T + 3, C};
      cpu::embedding_forward(cpu_ctx(), view_of(out, btc), view_of(tok, Shape{B, T}), view_of(wte, vc),
                             view_of(wpe, pc));
      Buffer dtok = upload(tok), dwte = upload_at(off, wte), dwpe = upload_at(off, wpe), dg = upload_at(off, g);
      Buffer o = poisoned(DType::kF32, off + B * T * C);
      cuda::embedding_forward(gpu(), view_at(o, off, btc), dtok.view(Shape{B, T}), view_at(dwte, off, vc),
                              view_at(dwpe, off, pc));
      EXPECT_TRUE(bitwise_equal(download_from(o, off), out));
      std::vector<float> gte = rng.normal(V * C), gpe = rng.normal((T + 3) * C);  // accumulate onto these
      Buffer ggte = upload_at(off, gte), ggpe = upload_at(off, gpe);
      cpu::embedding_backward(cpu_ctx(), view_of(gte, vc), view_of(gpe, pc), view_of(g, btc),
                              view_of(tok, Shape{B, T}));
      cuda::embedding_backward(gpu(), view_at(ggte, off, vc), view_at(ggpe, off, pc), view_at(dg, off, btc),
                               dtok.view(Shape{B, T}));
      EXPECT_TRUE(bitwise_equal(download_from(ggte, off), gte));
      EXPECT_TRUE(bitwise_equal(download_from(ggpe, off), gpe));
    }
  }
}

}  // namespace
}  // namespace zt::test
