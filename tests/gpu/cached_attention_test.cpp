// CUDA decoding kernels against the CPU's (label gpu): attention over a key/value cache (F32 at
// 1e-5 normwise: expf against exp_approx, the warps' partial sums merged in another order; BF16
// within one bf16 rounding, 2^-7 relative, per element), multi-head and grouped-query, a prompt's
// forward and single steps (300 and 1000 positions: the cache's positions split across blocks and
// merged, [Note: split positions]); and RoPE from a first position, within 1e-5 of the CPU's.
#include "kernels/cpu/cached_attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/cached_attention.h"
#include "kernels/cuda/rope.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaDecoding = GpuKernelTest;

TEST_F(CudaDecoding, CachedAttentionMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  struct Case {
    std::int64_t P, Tq;
    int NH, NKV, hs;
  };
  for (const Case c :
       {Case{1, 1, 12, 12, 64}, Case{300, 1, 12, 12, 64}, Case{257, 257, 32, 8, 64}, Case{1000, 3, 16, 2, 128}}) {
    SCOPED_TRACE(::testing::Message() << "P=" << c.P << " Tq=" << c.Tq << " NH=" << c.NH << " NKV=" << c.NKV
                                      << " hs=" << c.hs);
    const std::int64_t W = static_cast<std::int64_t>(c.NH + 2 * c.NKV) * c.hs,
                       C = static_cast<std::int64_t>(c.NH) * c.hs;
    const std::vector<float> cache = widened(rounded(rng.normal(c.P * W)));  // bf16-exact
    std::vector<float> cache_cpu = cache, want(static_cast<std::size_t>(c.Tq * C));
    cpu::cached_attention_forward(cpu_ctx(), view_of(want, {1, c.Tq, C}), view_of(cache_cpu, {1, c.P, W}), c.NH, c.NKV);
    const Buffer d_cache = upload(cache);
    Buffer d_out = poisoned(DType::kF32, c.Tq * C);
    cuda::cached_attention_forward(gpu(), view_at(d_out, 0, {1, c.Tq, C}), view_at(d_cache, 0, {1, c.P, W}), c.NH,
                                   c.NKV);
    EXPECT_TRUE(close_normwise(download_f32(d_out), to_double(want), 1e-5));

    const Buffer d_cache16 = upload_bf16(cache);
    Buffer d_out16 = poisoned(DType::kBF16, c.Tq * C);
    cuda::cached_attention_forward(gpu(), view_at(d_out16, 0, {1, c.Tq, C}), view_at(d_cache16, 0, {1, c.P, W}), c.NH,
                                   c.NKV);
    const std::vector<float> got16 = download_f32(d_out16);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got16[i], want[i], std::abs(want[i]) / 128.0 + 1e-5) << i;
    }
  }
}

TEST_F(CudaDecoding, RopeFromAFirstPositionMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t T = 3, first = 8190;
  const int hs = 64, heads = 40, W = 48 * hs;  // Llama 3.2 1B's rotated q and k heads, its v heads not
  const RopeFrequencies llama32{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 8192.0f}};
  const std::vector<float> x = rng.normal(T * W);
  std::vector<float> want = x;
  cpu::rope_forward(cpu_ctx(), view_of(want, {1, T, W}), heads, hs, llama32, first);
  Buffer d = upload_at(0, x);
  cuda::rope_forward(gpu(), view_at(d, 0, {1, T, W}), heads, hs, llama32, first);
  EXPECT_TRUE(close_normwise(download_from(d, 0), to_double(want), 1e-5));
}

}  // namespace
}  // namespace zt::test
