// The CUDA quantization kernels (kernels/cuda/int8_blocks_kernels.cuh) run on the CPU under the
// SIMT emulator ([Note: SIMT emulation] in simt_runtime.h), launched as int8_blocks.cu launches
// them, against the CPU kernel bit for bit: the packed words (scales and codes, padding included)
// from F32 and BF16 inputs of many magnitudes with an all-zero block and a NaN and an infinity,
// and the three dequantizing forms (F32, BF16, F32 accumulate). A small grid makes the warps'
// block loop turn.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/contracts/int8_blocks.h"
#include "kernels/cpu/int8_blocks.h"
#include "kernels/cuda/int8_blocks_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace q = cuda::detail::int8q;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

std::vector<float> inputs(Rng& rng, std::int64_t n) {
  std::vector<float> v = rng.normal(n);
  const std::vector<float> e = rng.uniform(int8_blocks::num_blocks(n), -30.0f, 30.0f);
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] *= std::exp2(e[static_cast<std::size_t>(i / 256)]);
  if (n > 3 * 256) {
    for (std::int64_t i = 256; i < 512; ++i) v[static_cast<std::size_t>(i)] = 0.0f;
    v[2 * 256 + 5] = std::numeric_limits<float>::quiet_NaN();
    v[3 * 256 + 9] = -std::numeric_limits<float>::infinity();
  }
  return v;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& x) {
  std::vector<std::uint32_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = std::bit_cast<std::uint32_t>(x[i]);
  return b;
}

template <typename T>
void run_size(Rng& rng, std::int64_t n) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << (std::is_same_v<T, float> ? " f32" : " bf16"));
  const std::int64_t words = int8_blocks::packed_words(n), blocks = int8_blocks::num_blocks(n);
  std::vector<T> src = device_values<T>(inputs(rng, n));
  const std::vector<float> src_values = host_values(src);

  std::vector<std::int32_t> want(static_cast<std::size_t>(words));
  std::vector<float> widened = src_values;
  cpu::quantize_int8_blocks(reference_ctx(), TensorView{widened.data(), DType::kF32, Device::kCPU, Shape{n}},
                            TensorView{want.data(), DType::kI32, Device::kCPU, Shape{words}});
  // Garbage the kernel must cover, and a guard past the packed words it must leave (emulation_util.h).
  std::vector<std::int32_t> got = guarded(static_cast<std::size_t>(words), std::int32_t{0x5a5a5a5a});
  auto* scales = reinterpret_cast<float*>(got.data());
  auto* codes = reinterpret_cast<std::int8_t*>(scales + blocks);
  simt::launch(dim3(2), q::kThreads, 0, q::quantize<T>, scales, codes, src.data(), n);
  ASSERT_TRUE(guard_kept(got, static_cast<std::size_t>(words), std::int32_t{0x5a5a5a5a}));
  EXPECT_TRUE(bitwise_equal(got, want)) << "packed words";

  const TensorView packed{want.data(), DType::kI32, Device::kCPU, Shape{words}};
  std::vector<float> ref(static_cast<std::size_t>(n));
  cpu::dequantize_int8_blocks(reference_ctx(), packed, TensorView{ref.data(), DType::kF32, Device::kCPU, Shape{n}},
                              false);
  std::vector<float> out(static_cast<std::size_t>(n), 3.0f);
  simt::launch(dim3(3), q::kThreads, 0, q::dequantize<float, false>, out.data(), scales, codes, n);
  EXPECT_TRUE(bitwise_equal(bits_of(out), bits_of(ref))) << "dequantize f32";

  std::vector<float> acc = rng.normal(n), acc_ref = acc;
  cpu::dequantize_int8_blocks(reference_ctx(), packed, TensorView{acc_ref.data(), DType::kF32, Device::kCPU, Shape{n}},
                              true);
  simt::launch(dim3(3), q::kThreads, 0, q::dequantize<float, true>, acc.data(), scales, codes, n);
  EXPECT_TRUE(bitwise_equal(bits_of(acc), bits_of(acc_ref))) << "dequantize accumulate";

  std::vector<bf16> bf_ref(static_cast<std::size_t>(n));
  cpu::dequantize_int8_blocks(reference_ctx(), packed, TensorView{bf_ref.data(), DType::kBF16, Device::kCPU, Shape{n}},
                              false);
  std::vector<bf16_dev> bf_out(static_cast<std::size_t>(n));
  simt::launch(dim3(3), q::kThreads, 0, q::dequantize<bf16_dev, false>, bf_out.data(), scales, codes, n);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bf_out[static_cast<std::size_t>(i)].bits, bf_ref[static_cast<std::size_t>(i)].bits) << "bf16 " << i;
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(Int8BlocksEmulation, MatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 5, 256, 257, 1000, 40 * 256 + 3}) {
    run_size<float>(rng, n);
    run_size<bf16_dev>(rng, n);
  }
}

}  // namespace
}  // namespace zt::test
