// The tensor-core flash attention kernels (kernels/cuda/flash_attention_tc_kernels.cuh) run on the
// CPU under the SIMT emulator ([Note: SIMT emulation] in simt_runtime.h) in the launchers' order
// (forward, the delta kernel, dq, dk/dv), against attention in fp64 on the same bf16 operands, with
// and without dropout on the probabilities, multi-head and grouped-query; bound as attention_reference.h states. This
// runs the kernels' own source in every build, GPU or not; the gpu-labelled tests run the compiled kernels where a
// device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/flash_attention_kernels.cuh"  // flash_delta_kernel
#include "kernels/cuda/flash_attention_tc_kernels.cuh"
#include "tests/emulation/attention_reference.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace tc = cuda::detail::tc_flash;
using namespace emulation;  // NOLINT: the shared reference

template <int HS>
void run_problem(const Problem& pr, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "B=" << pr.B << " T=" << pr.T << " NH=" << pr.NH << " NKV=" << pr.kv_heads()
                                    << " hs=" << HS << " dropout=" << pr.p);
  ASSERT_EQ(pr.hs, HS);
  Rng rng(seed);
  const std::int64_t B = pr.B, T = pr.T, NH = pr.NH, C = NH * HS, NKV = pr.kv_heads();
  const DropoutSpec drop{pr.p, /*seed=*/seed, /*site=*/7, /*first_sample=*/(std::int64_t{1} << 32) + 5};
  const std::vector<bf16_dev> qkv = to_device_bf16(rng.normal(B * T * pr.qkv_width()));
  const std::vector<bf16_dev> dout = to_device_bf16(rng.normal(B * T * C));
  std::vector<bf16_dev> out(static_cast<std::size_t>(B * T * C), bf16_dev{0xFFFF});  // NaN: unwritten shows
  std::vector<bf16_dev> dqkv(qkv.size(), bf16_dev{0xFFFF});
  std::vector<float> lse(static_cast<std::size_t>(B * NH * T), NAN), delta(lse.size(), NAN);
  const cuda::detail::FlashGeometry g =
      cuda::detail::flash_geometry(static_cast<int>(T), static_cast<int>(NH), static_cast<int>(NKV), HS);
  const cuda::detail::MaskParams mask = cuda::detail::mask_params(drop);
  const dim3 grid(static_cast<unsigned>((T + tc::kRows - 1) / tc::kRows), static_cast<unsigned>(B * NH));
  constexpr std::size_t fwd_bytes = tc::forward_smem<HS>().bytes, dq_bytes = tc::backward_smem<HS, false>().bytes,
                        dkv_bytes = tc::backward_smem<HS, true>().bytes;

  simt::launch(grid, tc::kThreads, fwd_bytes, tc::tc_forward_kernel<HS>, out.data(), lse.data(), qkv.data(), g, mask);
  const std::int64_t rows = B * NH * T;
  simt::launch(dim3(static_cast<unsigned>((rows + 255) / 256)), 256, 0,
               cuda::detail::flash::flash_delta_kernel<bf16_dev>, delta.data(), dout.data(), out.data(), g,
               static_cast<int>(HS), rows);
  simt::launch(grid, tc::kThreads, dq_bytes, tc::tc_dq_kernel<HS>, dqkv.data(), qkv.data(), dout.data(), lse.data(),
               delta.data(), g, mask);
  const dim3 kv_grid(grid.x, static_cast<unsigned>(B * NKV));  // a block per key/value head's rows
  simt::launch(kv_grid, tc::kThreads, dkv_bytes, tc::tc_dkv_kernel<HS>, dqkv.data(), qkv.data(), dout.data(),
               lse.data(), delta.data(), g, mask);

  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
  const Reference ref = reference(pr, widen(qkv), widen(dout), drop);
  EXPECT_TRUE(within_bound(widen(out), ref.out, ref.out_slack)) << "out";
  EXPECT_TRUE(close_normwise(lse, ref.lse, 1e-5, /*scale=*/1.0)) << "lse";  // as the CUDA-core test judges it
  EXPECT_TRUE(within_bound(widen(dqkv), ref.dqkv, ref.dqkv_slack)) << "dqkv";
}

// Head sizes 16-128; T of one row, of a partial tile, and of several tiles not a multiple of 64;
// batch and heads above one so the (sample, head) grid rows and the mask's sample index are used.
TEST(FlashAttentionTensorCoreEmulation, MatchesFp64AttentionWithAndWithoutDropout) {
  const std::uint32_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ZT_TEST_SEED=" << seed);
  for (float p : {0.0f, 0.2f}) {
    run_problem<16>({1, 1, 1, 16, p}, seed);
    run_problem<16>({2, 67, 3, 16, p}, seed + 1);
    run_problem<32>({2, 130, 2, 32, p}, seed + 2);
    run_problem<64>({1, 200, 2, 64, p}, seed + 3);
    run_problem<128>({1, 70, 2, 128, p}, seed + 4);
    // Grouped-query heads: two query heads per key/value head, and one key/value head for all;
    // Llama's head size 64 with four query heads per key/value head over two samples (the dk/dv
    // grid's sample index), not under ThreadSanitizer (the same kernels' barriers as above).
    run_problem<16>({1, 67, 4, 16, p, 2}, seed + 5);
    run_problem<32>({1, 50, 3, 32, p, 1}, seed + 6);
#ifndef ZT_EMULATION_UNDER_TSAN
    run_problem<64>({2, 40, 8, 64, p, 2}, seed + 7);
    run_problem<16>({2, 67, 4, 16, p, 2}, seed + 8);  // the shape of the cuDNN grouped-query GPU test
#endif
  }
}

}  // namespace
}  // namespace zt::test
