// CUDA RMSNorm against the CPU kernels (label gpu): forward, rstd, the accumulating backward and
// the chunked weight gradient, fp32 at 1e-5 normwise (sums of C terms in another fixed order), on
// shapes with C not a multiple of 4 and N not a multiple of the 32-row chunk, at offset 0 (16-byte
// groups where C allows) and one element off alignment (single elements).
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/rmsnorm.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaRmsNorm = GpuKernelTest;

constexpr float kEps = 1e-5f;

TEST_F(CudaRmsNorm, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{1, 1},
                      {5, 37},
                      {65, 12},
                      {33, 768},
                      {4099, 100},
                      {9, 2064},
                      {70, 2048},
                      {35, 4104}}) {  // a block a row: one and two groups a thread, and past it (warp a row)
    for (std::int64_t off : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      std::vector<float> x = rng.normal(N * C, 0.5f, 2.0f), w = rng.normal(C, 1.0f, 0.3f), g = rng.normal(N * C);
      const std::vector<float> dinp0 = rng.normal(N * C), dw0 = rng.normal(C);
      std::vector<float> out(x.size()), rstd(N), dinp = dinp0, dw = dw0;
      const Shape nc{N, C}, n{N}, c{C};
      Buffer dx = upload_at(off, x), dwt = upload_at(off, w), dg = upload_at(off, g), ddinp = upload_at(off, dinp),
             ddw = upload_at(off, dw);
      cpu::rmsnorm_forward(cpu_ctx(), view_of(out, nc), view_of(rstd), view_of(x, nc), view_of(w), kEps);
      cpu::rmsnorm_backward(cpu_ctx(), view_of(dinp, nc), view_of(dw), view_of(g, nc), view_of(x, nc), view_of(w),
                            view_of(rstd));
      Buffer o = poisoned(DType::kF32, off + N * C), r = poisoned(DType::kF32, off + N);
      cuda::rmsnorm_forward(gpu(), view_at(o, off, nc), view_at(r, off, n), view_at(dx, off, nc), view_at(dwt, off, c),
                            kEps);
      EXPECT_TRUE(close_normwise(download_from(o, off), to_double(out), 1e-5));
      EXPECT_TRUE(close_normwise(download_from(r, off), to_double(rstd), 1e-5));
      cuda::rmsnorm_backward(gpu(), view_at(ddinp, off, nc), view_at(ddw, off, c), view_at(dg, off, nc),
                             view_at(dx, off, nc), view_at(dwt, off, c), view_at(r, off, n));
      EXPECT_TRUE(close_normwise(download_from(ddinp, off), to_double(dinp), 1e-5));
      EXPECT_TRUE(close_normwise(download_from(ddw, off), to_double(dw), 1e-5));
      // The warp-a-row kernels (NormBackwardRows::kWarp) from the same starting gradients: dweight
      // bit for bit the block-a-row kernel's (the same per-column order), dinp within the bound.
      Buffer wdinp = upload_at(off, dinp0), wdw = upload_at(off, dw0);
      cuda::rmsnorm_backward(gpu(), view_at(wdinp, off, nc), view_at(wdw, off, c), view_at(dg, off, nc),
                             view_at(dx, off, nc), view_at(dwt, off, c), view_at(r, off, n),
                             cuda::NormBackwardRows::kWarp);
      EXPECT_TRUE(bitwise_equal(download_from(wdw, off), download_from(ddw, off))) << "dweight, warp vs block a row";
      EXPECT_TRUE(close_normwise(download_from(wdinp, off), to_double(dinp), 1e-5)) << "dinp, warp a row";
    }
  }
}

}  // namespace
}  // namespace zt::test
