// The CUDA RoPE kernel (kernels/cuda/rope_kernels.cuh) run on the CPU under the SIMT emulator
// against the CPU kernels: forward and backward in place, F32 and BF16, on rows whose last heads
// are not rotated, unscaled and with linear and llama3 rope_scaling, the forward also from a first
// position past 0 (decoding). Tolerances: 1e-5 normwise (cosf/sinf against the CPU's), BF16 results also within 2^-7
// per element; the columns past the rotated heads bitwise untouched; and bit for bit the per-element arithmetic the
// kernel's header states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/contracts/rope_angles.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/rope_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace rp = cuda::detail::rope;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

template <typename T>
void run_shape(Rng& rng, std::int64_t B, int T_len, int hs, int heads, int W, const RopeFrequencies& freq,
               int first = 0) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " B=" << B << " T=" << T_len << " hs=" << hs
                                    << " heads=" << heads << " W=" << W << " first position " << first);
  const DType dt = dtype_of<T>();
  const Shape s{B, T_len, W};
  const std::vector<T> x = device_values<T>(rng.normal(B * T_len * W));
  for (float sign : {1.0f, -1.0f}) {
    std::vector<T> c = x, g = x;
    if (sign > 0) {
      cpu::rope_forward(reference_ctx(), TensorView{c.data(), dt, Device::kCPU, s}, heads, hs, freq, first);
    } else {
      cpu::rope_backward(reference_ctx(), TensorView{c.data(), dt, Device::kCPU, s}, heads, hs, freq);
    }
    const int from = sign > 0 ? first : 0;  // the backward's rows start at position 0
    simt::launch(dim3(2), rp::kThreads, 0, rp::rope_kernel<T>, g.data(), B * T_len, T_len, W, heads, hs, freq,
                 rp::frequency_table(hs, freq), sign, from);
    EXPECT_TRUE(close_to_cpu(host_values(g), host_values(c), kBf16)) << "sign " << sign;
    // Each element's arithmetic as the kernel's header states it (the angle from rope_angles.h, its
    // cosf and sinf, one rounding to T), bit for bit: however the kernel spreads rows, heads and
    // pairs over threads, every element gets these operations.
    std::vector<T> want = x;
    for (std::int64_t r = 0; r < B * T_len; ++r) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < hs / 2; ++i) {
          const float angle = rope_angle(from + static_cast<int>(r % T_len), i, hs, freq);
          const float cs = cosf(angle), sn = sign * sinf(angle);
          const std::int64_t at = r * W + static_cast<std::int64_t>(h) * hs + i;
          const float a = host_values(std::vector<T>{x[at]})[0], b = host_values(std::vector<T>{x[at + hs / 2]})[0];
          want[at] = device_values<T>({a * cs - b * sn})[0];
          want[at + hs / 2] = device_values<T>({b * cs + a * sn})[0];
        }
      }
    }
    EXPECT_TRUE(bitwise_equal(g, want)) << "the stated arithmetic, sign " << sign;
    for (std::int64_t r = 0; r < B * T_len; ++r) {
      for (int col = heads * hs; col < W; ++col) {
        ASSERT_EQ(host_values(std::vector<T>{g[r * W + col]})[0], host_values(std::vector<T>{x[r * W + col]})[0]);
      }
    }
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(RopeEmulation, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  // Llama 3.2 1B's frequencies (llama3 scaling: at head size 64 each of its three bands has pairs).
  const RopeFrequencies llama32{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 8192.0f}};
  run_shape<float>(rng, 2, 9, 8, 3, 40, {10000.0f});
  run_shape<bf16_dev>(rng, 2, 9, 8, 3, 40, {10000.0f, {RopeScalingType::kLinear, 2.0f}});
  run_shape<float>(rng, 1, 33, 64, 2, 192, {500000.0f});
  run_shape<float>(rng, 1, 33, 64, 2, 192, llama32);
  run_shape<bf16_dev>(rng, 1, 17, 64, 5, 384, llama32);
  run_shape<bf16_dev>(rng, 1, 5, 16, 19, 320, {10000.0f});  // a row's heads in three batches, the last partial
  run_shape<float>(rng, 1, 3, 64, 2, 192, llama32, 8190);   // a decoding step's rows, around llama3's band edge
  run_shape<bf16_dev>(rng, 1, 1, 8, 3, 40, {10000.0f}, 57);
}

}  // namespace
}  // namespace zt::test
