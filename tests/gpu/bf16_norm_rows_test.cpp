// The norm backwards' two chunk kernels with bf16 activations, as the GPU configs train (label
// gpu): the block-a-row default and the warp-a-row kernels (cuda::NormBackwardRows; [Note: a
// block a row] in kernels/cuda/block_row_backward.cuh) each against the CPU within
// bf16_bound.h's bound, and their parameter gradients bit for bit the same (the same per-column
// order and arithmetic), at GPT-2's C = 768 and Llama 3.2 1B's 2048 (a thread a group), 2064 (two
// groups a thread), 4104 (past the block kernel: both launch the warp kernels), row counts that
// leave the last chunk's batch partial, and a misaligned offset (the scalar kernels); and
// NormBackwardRows::kFastest ([Note: the norm backward's kernel, timed] in
// kernels/cuda/norm_rows_choice.cpp): its timing leaves the caller's gradients as the chosen kernel
// alone writes them.
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

// kFastest times both kernels into scratch on a shape's first call (here on a slice: the limit
// lowered below dinp's size) and then runs the faster: dinp and the parameter gradients must be
// bit for bit what that kernel alone writes from the same start, on the first call and on a
// later one, which must not time again.
TEST_F(CudaBf16NormRows, TimedChoiceWritesWhatTheChosenKernelWrites) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 1000, C = 768;
  const Shape nc{N, C}, n{N}, c{C};
  resources_->timed_scratch_limit_bytes = 96 * C * 2;  // 96 of the 1000 bf16 rows
  std::vector<bf16> x = rounded(rng.normal(N * C, 1.0f, 2.0f));
  const std::vector<bf16> g = rounded(rng.normal(N * C)), dx0 = rounded(rng.normal(N * C));
  std::vector<float> w = rng.normal(C), bias = rng.normal(C);
  const std::vector<float> dw0 = rng.normal(C), db0 = rng.normal(C);
  std::vector<bf16> out(x.size());
  std::vector<float> mean(N), rstd(N);
  cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                         view_of(bias));
  Buffer gx = upload_bf16_at(0, x), gg = upload_bf16_at(0, g), gw = upload(w), gm = upload(mean), gr = upload(rstd);
  // dinp, dweight and dbias after one LayerNorm backward from dx0, dw0, db0; RMSNorm's with rstd.
  auto layernorm = [&](cuda::NormBackwardRows rows) {
    Buffer gdx = upload_bf16_at(0, dx0), gdw = upload(dw0), gdb = upload(db0);
    cuda::layernorm_backward(gpu(), gdx.view(nc), gdw.view(c), gdb.view(c), gg.view(nc), gx.view(nc), gw.view(c),
                             gm.view(n), gr.view(n), rows);
    std::vector<float> all = widened(download_bf16_from(gdx, 0)), dw = download_from(gdw, 0),
                       db = download_from(gdb, 0);
    all.insert(all.end(), dw.begin(), dw.end());
    all.insert(all.end(), db.begin(), db.end());
    return all;
  };
  auto rmsnorm = [&](cuda::NormBackwardRows rows) {
    Buffer gdx = upload_bf16_at(0, dx0), gdw = upload(dw0);
    cuda::rmsnorm_backward(gpu(), gdx.view(nc), gdw.view(c), gg.view(nc), gx.view(nc), gw.view(c), gr.view(n), rows);
    std::vector<float> all = widened(download_bf16_from(gdx, 0)), dw = download_from(gdw, 0);
    all.insert(all.end(), dw.begin(), dw.end());
    return all;
  };
  const std::vector<float> ln_first = layernorm(cuda::NormBackwardRows::kFastest);
  const std::vector<float> rms_first = rmsnorm(cuda::NormBackwardRows::kFastest);
  auto& choices = resources_->norm_backward_choices();
  ASSERT_EQ(choices.size(), 2u) << "one timed choice per norm and shape";
  ASSERT_EQ(resources_->norm_rows_timings, 2) << "each shape timed once";
  for (const auto& [key, chosen] : choices) {
    const bool is_layernorm = key[0] == 0;
    SCOPED_TRACE(is_layernorm ? "LayerNorm" : "RMSNorm");
    ASSERT_TRUE(chosen == cuda::NormBackwardRows::kBlock || chosen == cuda::NormBackwardRows::kWarp);
    const std::vector<float> alone = is_layernorm ? layernorm(chosen) : rmsnorm(chosen);
    EXPECT_TRUE(bitwise_equal(is_layernorm ? ln_first : rms_first, alone)) << "the timed call against the kernel alone";
    const std::vector<float> again =
        is_layernorm ? layernorm(cuda::NormBackwardRows::kFastest) : rmsnorm(cuda::NormBackwardRows::kFastest);
    EXPECT_TRUE(bitwise_equal(again, alone)) << "a later call";
  }
  EXPECT_EQ(resources_->norm_rows_timings, 2) << "a later call timed again";
}

}  // namespace
}  // namespace zt::test
