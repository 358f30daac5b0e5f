// The CUDA cast kernels (kernels/cuda/cast_kernels.cuh) run on the CPU under the SIMT emulator
// ([Note: SIMT emulation] in simt_runtime.h), split as cast.cu splits them (the 8-wide kernels
// over the aligned bulk, the scalar one for the tail), against the CPU cast, bit for bit: random
// values over many magnitudes plus the special cases (signed zeros, infinities, NaNs with sign and
// payload, round-to-even ties, the largest finite floats that round to infinity, subnormals).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cast.h"
#include "kernels/cuda/cast_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace casts = cuda::detail::casts;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

std::vector<float> cast_inputs(Rng& rng, std::int64_t n) {
  std::vector<float> v = rng.normal(n);
  const std::vector<float> scale = rng.uniform(n, -40.0f, 40.0f);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= std::exp2(scale[i]);
  const std::uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                    0xffa00000u, 0x7f812345u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                                    0xff7fffffu, 0x00000001u, 0x807fffffu, 0x3f7fffffu};
  for (std::size_t k = 0; k < std::size(specials) && k < v.size(); ++k) {
    v[(k * 7919) % v.size()] = std::bit_cast<float>(specials[k]);
  }
  return v;
}

// cast.cu's split: the first 8 * n8 elements 8-wide (pointers 16-byte aligned here), the rest scalar.
void run_size(Rng& rng, std::int64_t n) {
  SCOPED_TRACE(::testing::Message() << "n=" << n);
  const std::int64_t n8 = n / 8, tail = n - 8 * n8;
  std::vector<float4> src_storage(static_cast<std::size_t>((n + 3) / 4 + 1));
  auto* src = reinterpret_cast<float*>(src_storage.data());
  const std::vector<float> values = cast_inputs(rng, n);
  std::copy(values.begin(), values.end(), src);
  std::vector<uint4> bf_storage(static_cast<std::size_t>(n8 + 1));
  auto* bf = reinterpret_cast<std::uint16_t*>(bf_storage.data());
  std::vector<std::uint16_t> want(static_cast<std::size_t>(n));
  cpu::cast(reference_ctx(), TensorView{want.data(), DType::kBF16, Device::kCPU, Shape{n}},
            TensorView{src, DType::kF32, Device::kCPU, Shape{n}});
  const dim3 grid(2);  // fewer threads than elements: the grid-stride loops turn
  if (n8 > 0)
    simt::launch(grid, casts::kThreads, 0, casts::f32_to_bf16_vec8, bf_storage.data(), src_storage.data(), n8);
  if (tail > 0) simt::launch(grid, casts::kThreads, 0, casts::f32_to_bf16_scalar, bf + 8 * n8, src + 8 * n8, tail);
  EXPECT_TRUE(bitwise_equal(std::vector<std::uint16_t>(bf, bf + n), want)) << "f32 -> bf16";

  // And back: widening is exact, so the CPU's and the kernels' results are the same bits.
  std::vector<float> want_back(static_cast<std::size_t>(n));
  cpu::cast(reference_ctx(), TensorView{want_back.data(), DType::kF32, Device::kCPU, Shape{n}},
            TensorView{want.data(), DType::kBF16, Device::kCPU, Shape{n}});
  std::vector<float4> back_storage(src_storage.size());
  auto* back = reinterpret_cast<float*>(back_storage.data());
  if (n8 > 0)
    simt::launch(grid, casts::kThreads, 0, casts::bf16_to_f32_vec8, back_storage.data(), bf_storage.data(), n8);
  if (tail > 0) simt::launch(grid, casts::kThreads, 0, casts::bf16_to_f32_scalar, back + 8 * n8, bf + 8 * n8, tail);
  std::vector<std::uint32_t> got_bits(static_cast<std::size_t>(n)), want_bits(got_bits.size());
  for (std::int64_t i = 0; i < n; ++i) {
    got_bits[static_cast<std::size_t>(i)] = std::bit_cast<std::uint32_t>(back[i]);
    want_bits[static_cast<std::size_t>(i)] = std::bit_cast<std::uint32_t>(want_back[static_cast<std::size_t>(i)]);
  }
  EXPECT_TRUE(bitwise_equal(got_bits, want_bits)) << "bf16 -> f32";
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(CastEmulation, BothDirectionsMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 7, 8, 15, 4099, 8 * 1000 + 5}) run_size(rng, n);
}

}  // namespace
}  // namespace zt::test
