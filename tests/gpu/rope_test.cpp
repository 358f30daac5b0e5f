// CUDA RoPE against the CPU kernel (label gpu): forward and backward in place, unscaled and with
// Llama 3.2 1B's llama3 rope_scaling, fp32 at 1e-5 normwise (cosf/sinf against the CPU's), the
// unrotated columns bitwise untouched.
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
  const RopeFrequencies llama32{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 8192.0f}};
  for (int run = 0; run < 4; ++run) {
    const bool backward = run % 2 == 1;
    const RopeFrequencies freq = run < 2 ? RopeFrequencies{500000.0f} : llama32;
    SCOPED_TRACE(::testing::Message() << (backward ? "backward" : "forward") << (run < 2 ? "" : ", llama3"));
    std::vector<float> want = x;
    Buffer d = upload_at(0, x);
    if (backward) {
      cpu::rope_backward(cpu_ctx(), view_of(want, s), heads, hs, freq);
      cuda::rope_backward(gpu(), view_at(d, 0, s), heads, hs, freq);
    } else {
      cpu::rope_forward(cpu_ctx(), view_of(want, s), heads, hs, freq);
      cuda::rope_forward(gpu(), view_at(d, 0, s), heads, hs, freq);
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
