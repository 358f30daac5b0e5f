// CUDA RoPE against the CPU kernel (label gpu): forward and backward in place, fp32 at 1e-5
// normwise (cosf/sinf against the CPU's), the unrotated columns bitwise untouched.
#include "kernels/cpu/rope.h"
#include "kernels/cuda/rope.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaRope = GpuKernelTest;

TEST_F(CudaRope, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 3, T = 128;
  const int hs = 64, heads = 12, W = 16 * hs;  // 8 q heads and 4 k heads rotated, 4 v heads not
  const Shape s{B, T, W};
  const std::vector<float> x = rng.normal(B * T * W);
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    std::vector<float> want = x;
    Buffer d = upload_at(0, x);
    if (backward) {
      cpu::rope_backward(cpu_ctx(), view_of(want, s), heads, hs, 500000.0f);
      cuda::rope_backward(gpu(), view_at(d, 0, s), heads, hs, 500000.0f);
    } else {
      cpu::rope_forward(cpu_ctx(), view_of(want, s), heads, hs, 500000.0f);
      cuda::rope_forward(gpu(), view_at(d, 0, s), heads, hs, 500000.0f);
    }
    const std::vector<float> got = download_from(d, 0);
    EXPECT_TRUE(close_normwise(got, to_double(want), 1e-5));
    for (std::int64_t r = 0; r < B * T; ++r) {
      for (int c = heads * hs; c < W; ++c) ASSERT_EQ(got[r * W + c], x[r * W + c]);
    }
  }
}

}  // namespace
}  // namespace zt::test
