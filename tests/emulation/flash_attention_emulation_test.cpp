// The CUDA-core flash attention kernels (kernels/cuda/flash_attention_kernels.cuh: every head size,
// F32 or BF16 activations) run on the CPU under the SIMT emulator ([Note: SIMT emulation] in
// simt_runtime.h) in the launcher's order, against attention in fp64, with and without dropout on
// the probabilities, with multi-head and grouped-query heads. F32: normwise 1e-5 (out, lse) and 5e-5 (dqkv), the
// tolerances of tests/gpu/flash_attention_test.cpp for fp32 sums in another order; BF16: the bound of
// attention_reference.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/flash_attention_kernels.cuh"
#include "tests/emulation/attention_reference.h"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace flash = cuda::detail::flash;
using namespace emulation;  // NOLINT: the shared reference

template <int HS, typename Act>
void run_problem(const Problem& pr, std::uint32_t seed) {
  constexpr bool kF32 = std::is_same_v<Act, float>;
  SCOPED_TRACE(::testing::Message() << (kF32 ? "F32" : "BF16") << " B=" << pr.B << " T=" << pr.T << " NH=" << pr.NH
                                    << " NKV=" << pr.kv_heads() << " hs=" << HS << " dropout=" << pr.p);
  ASSERT_EQ(pr.hs, HS);
  Rng rng(seed);
  const std::int64_t B = pr.B, T = pr.T, NH = pr.NH, C = NH * HS, NKV = pr.kv_heads();
  const DropoutSpec drop{pr.p, /*seed=*/seed, /*site=*/4, /*first_sample=*/(std::int64_t{1} << 32) + 17};
  const std::vector<Act> qkv = device_values<Act>(rng.normal(B * T * pr.qkv_width()));
  const std::vector<Act> dout = device_values<Act>(rng.normal(B * T * C));
  std::vector<Act> out = device_values<Act>(std::vector<float>(static_cast<std::size_t>(B * T * C), NAN));
  std::vector<Act> dqkv = device_values<Act>(std::vector<float>(qkv.size(), NAN));
  std::vector<float> lse(static_cast<std::size_t>(B * NH * T), NAN), delta(lse.size(), NAN);
  const cuda::detail::FlashGeometry g =
      cuda::detail::flash_geometry(static_cast<int>(T), static_cast<int>(NH), static_cast<int>(NKV), HS);
  const cuda::detail::MaskParams mask = cuda::detail::mask_params(drop);
  const dim3 grid(static_cast<unsigned>((T + flash::kRows - 1) / flash::kRows), static_cast<unsigned>(B * NH));
  const std::int64_t rows = B * NH * T;

  simt::launch(grid, flash::kRows, 0, flash::flash_forward_kernel<HS, Act>, out.data(), lse.data(), qkv.data(), g,
               mask);
  simt::launch(dim3(static_cast<unsigned>((rows + 255) / 256)), 256, 0, flash::flash_delta_kernel<Act>, delta.data(),
               dout.data(), out.data(), g, static_cast<int>(HS), rows);
  simt::launch(grid, flash::kPairThreads, 0, flash::flash_dq_kernel<HS, Act>, dqkv.data(), qkv.data(), dout.data(),
               lse.data(), delta.data(), g, mask);
  const dim3 kv_grid(grid.x, static_cast<unsigned>(B * NKV));  // a block per key/value head's rows
  simt::launch(kv_grid, flash::kPairThreads, 0, flash::flash_dkv_kernel<HS, Act>, dqkv.data(), qkv.data(), dout.data(),
               lse.data(), delta.data(), g, mask);

  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
  const Reference ref = reference(pr, host_values(qkv), host_values(dout), drop);
  // lse sums scores q.k / sqrt(hs) of O(1) inputs: judged against that size, not its own (at T = 1
  // it is one score, which can be near 0: 0.0068 missed 1e-5 relative by 1.2e-7, fp32's rounding).
  EXPECT_TRUE(close_normwise(lse, ref.lse, 1e-5, /*scale=*/1.0)) << "lse";
  if constexpr (kF32) {
    EXPECT_TRUE(close_normwise(out, ref.out, 1e-5)) << "out";
    EXPECT_TRUE(close_normwise(dqkv, ref.dqkv, 5e-5)) << "dqkv";
  } else {
    EXPECT_TRUE(within_bound(widen(out), ref.out, ref.out_slack)) << "out";
    EXPECT_TRUE(within_bound(widen(dqkv), ref.dqkv, ref.dqkv_slack)) << "dqkv";
  }
}

// Every compiled head size, T not a multiple of the tiles (64 rows a block, 4096 / hs keys a tile).
// Under ThreadSanitizer only with dropout: the same barriers and shuffles, in half the time (every
// shuffle of the backward's thread pairs is a warp barrier in the emulator, slow under TSan).
TEST(FlashAttentionCudaCoreEmulation, MatchesFp64AttentionWithAndWithoutDropout) {
  const std::uint32_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ZT_TEST_SEED=" << seed);
#ifdef ZT_EMULATION_UNDER_TSAN
  for (float p : {0.2f}) {
#else
  for (float p : {0.0f, 0.2f}) {
#endif
    run_problem<8, float>({1, 1, 1, 8, p}, seed);
    run_problem<16, float>({2, 67, 3, 16, p}, seed + 1);
    run_problem<32, float>({2, 130, 2, 32, p}, seed + 2);
    run_problem<64, float>({1, 200, 2, 64, p}, seed + 3);
    // T 65: the second block's one row sees key 64 alone in the last tile (a block's last key on a
    // tile's first row, which only T 1 reached otherwise).
    run_problem<64, float>({1, 65, 1, 64, p}, seed + 10);
    run_problem<128, float>({1, 70, 2, 128, p}, seed + 4);
    run_problem<8, bf16_dev>({2, 75, 2, 8, p}, seed + 5);
    run_problem<64, bf16_dev>({1, 140, 2, 64, p}, seed + 6);
    // Grouped-query heads: two query heads per key/value head, and one key/value head for four
    // (multi-query); under ThreadSanitizer the first only (the same kernels' barriers).
    run_problem<16, float>({1, 67, 4, 16, p, 2}, seed + 7);
#ifndef ZT_EMULATION_UNDER_TSAN
    run_problem<16, bf16_dev>({1, 50, 4, 16, p, 1}, seed + 8);
    run_problem<64, bf16_dev>({2, 40, 8, 64, p, 2}, seed + 9);  // Llama's: 4 query heads a kv head
#endif
  }
}

}  // namespace
}  // namespace zt::test
