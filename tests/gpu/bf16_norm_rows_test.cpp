// The norm backwards' two chunk kernels with bf16 activations, as the GPU configs train (label
// gpu): the block-a-row default and the warp-a-row kernels (cuda::NormBackwardRows; [Note: a
// block a row] in kernels/cuda/block_row_backward.cuh) each against the CPU within
// bf16_bound.h's bound, and their parameter gradients bit for bit the same (the same per-column
// order and arithmetic), at GPT-2's C = 768 and Llama 3.2 1B's 2048 (a thread a group), 2064 (two
// groups a thread), 4104 (past the block kernel: both launch the warp kernels), row counts that
// leave the last chunk's batch partial, and a misaligned offset (the scalar kernels).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/rmsnorm.h"
#include "tests/gpu/bf16_bound.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaBf16NormRows = GpuKernelTest;

struct RowShape {
  std::int64_t N, C;
};
const RowShape kShapes[] = {{37, 768}, {70, 2048}, {35, 2064}, {9, 4104}};
constexpr cuda::NormBackwardRows kRows[] = {cuda::NormBackwardRows::kBlock, cuda::NormBackwardRows::kWarp};

TEST_F(CudaBf16NormRows, LayerNormBackwardBlockAndWarpKernelsAgree) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kShapes) {
    for (std::int64_t off : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      const Shape nc{N, C}, n{N}, c{C};
      std::vector<bf16> x = rounded(rng.normal(N * C, 1.0f, 2.0f)), g = rounded(rng.normal(N * C));
      const std::vector<bf16> dx0 = rounded(rng.normal(N * C));
      std::vector<float> w = rng.normal(C), bias = rng.normal(C);
      const std::vector<float> dw0 = rng.normal(C), db0 = rng.normal(C);
      std::vector<bf16> out(x.size()), dx = dx0;
      std::vector<float> mean(N), rstd(N), dw = dw0, db = db0;
      cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                             view_of(bias));
      cpu::layernorm_backward(cpu_ctx(), view_of(dx, nc), view_of(dw), view_of(db), view_of(g, nc), view_of(x, nc),
                              view_of(w), view_of(mean), view_of(rstd));
      Buffer gx = upload_bf16_at(off, x), gg = upload_bf16_at(off, g), gw = upload_at(off, w),
             gm = upload_at(off, mean), gr = upload_at(off, rstd);
      std::vector<std::vector<float>> params;
      for (cuda::NormBackwardRows rows : kRows) {
        Buffer gdx = upload_bf16_at(off, dx0), gdw = upload_at(off, dw0), gdb = upload_at(off, db0);
        cuda::layernorm_backward(gpu(), view_at(gdx, off, nc), view_at(gdw, off, c), view_at(gdb, off, c),
                                 view_at(gg, off, nc), view_at(gx, off, nc), view_at(gw, off, c), view_at(gm, off, n),
                                 view_at(gr, off, n), rows);
        const char* which = rows == cuda::NormBackwardRows::kBlock ? "block a row" : "warp a row";
        EXPECT_TRUE(within_bound(widened(download_bf16_from(gdx, off)), widened(dx), 1e-5)) << "dinp, " << which;
        EXPECT_TRUE(close_normwise(download_from(gdw, off), to_double(dw), 1e-5)) << "dweight, " << which;
        EXPECT_TRUE(close_normwise(download_from(gdb, off), to_double(db), 1e-5)) << "dbias, " << which;
        std::vector<float> both = download_from(gdw, off), gb = download_from(gdb, off);
        both.insert(both.end(), gb.begin(), gb.end());
        params.push_back(both);
      }
      EXPECT_TRUE(bitwise_equal(params[0], params[1])) << "dweight and dbias, block vs warp a row";
    }
  }
}

TEST_F(CudaBf16NormRows, RmsNormBackwardBlockAndWarpKernelsAgree) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kShapes) {
    for (std::int64_t off : {0, 1}) {
      for (bool bf16_weight : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off
                                          << (bf16_weight ? " bf16" : " f32") << " weight and dweight");
        const Shape nc{N, C}, n{N}, c{C};
        std::vector<bf16> x = rounded(rng.normal(N * C, 0.5f, 2.0f)), g = rounded(rng.normal(N * C));
        const std::vector<bf16> dx0 = rounded(rng.normal(N * C));
        std::vector<float> w = rng.normal(C, 1.0f, 0.3f),
                           dw0 = bf16_weight ? std::vector<float>(C, 0.0f) : rng.normal(C);
        if (bf16_weight) w = widened(rounded(w));
        std::vector<bf16> out(x.size()), dx = dx0;
        std::vector<float> rstd(N), dw = dw0;
        cpu::rmsnorm_forward(cpu_ctx(), view_of(out, nc), view_of(rstd), view_of(x, nc), view_of(w), 1e-5f);
        cpu::rmsnorm_backward(cpu_ctx(), view_of(dx, nc), view_of(dw), view_of(g, nc), view_of(x, nc), view_of(w),
                              view_of(rstd));
        Buffer gx = upload_bf16_at(off, x), gg = upload_bf16_at(off, g), gr = upload_at(off, rstd);
        Buffer gw = bf16_weight ? upload_bf16_at(off, rounded(w)) : upload_at(off, w);
        std::vector<std::vector<float>> params;
        for (cuda::NormBackwardRows rows : kRows) {
          // bf16 dweight is added in place into zeroed storage, as the store lends it.
          Buffer gdx = upload_bf16_at(off, dx0),
                 gdw = bf16_weight ? upload_bf16_at(off, rounded(dw0)) : upload_at(off, dw0);
          cuda::rmsnorm_backward(gpu(), view_at(gdx, off, nc), view_at(gdw, off, c), view_at(gg, off, nc),
                                 view_at(gx, off, nc), view_at(gw, off, c), view_at(gr, off, n), rows);
          const char* which = rows == cuda::NormBackwardRows::kBlock ? "block a row" : "warp a row";
          const std::vector<float> got_dw =
              bf16_weight ? widened(download_bf16_from(gdw, off)) : download_from(gdw, off);
          EXPECT_TRUE(within_bound(widened(download_bf16_from(gdx, off)), widened(dx), 1e-5)) << "dinp, " << which;
          EXPECT_TRUE(bf16_weight ? within_bound(got_dw, dw, 1e-5) : close_normwise(got_dw, to_double(dw), 1e-5))
              << "dweight, " << which;
          params.push_back(got_dw);
        }
        EXPECT_TRUE(bitwise_equal(params[0], params[1])) << "dweight, block vs warp a row";
      }
    }
  }
}

}  // namespace
}  // namespace zt::test
