// CUDA casts, residual adds, the fp32 scale, int8 block quantization and GELU against the CPU
// kernels (label gpu). Casts, adds, scales and the int8 rule are exact or one rounding per element, so
// they must match the CPU bit for bit; GELU uses expf (<= 2 ulp) where the
// CPU uses a ~1 ulp polynomial, so it is held to a normwise 1e-5 (observed errors are a few 1e-7).
// Sizes cover the float4 bulk, the scalar tail, and a view 1 element off 16-byte alignment.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/contracts/int8_blocks.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/int8_blocks.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/int8_blocks.h"
#include "kernels/cuda/residual.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaElementwise = GpuKernelTest;

const std::int64_t kSizes[] = {1, 7, 8, 1000, 4099, 1 << 16};

TEST_F(CudaElementwise, CastsMatchCpuBitForBitIncludingNanInfAndTies) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    std::vector<float> x = rng.normal(n, 0.0f, 100.0f);
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.00390625f /* a tie */, 3.4e38f};
    for (std::size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
    std::vector<bf16> want(x.size());
    cpu::cast(cpu_ctx(), view_of(want), view_of(x));
    for (std::int64_t offset : {0, 1}) {  // 1: misaligned views take the scalar kernel
      if (offset >= n) continue;
      const std::int64_t m = n - offset;
      Buffer src = upload(x);
      Buffer dst = poisoned(DType::kBF16, n);
      cuda::cast(gpu(), dst.view().slice(offset, m), src.view().slice(offset, m));
      const auto got = download<std::uint16_t>(dst);
      for (std::int64_t i = offset; i < n; ++i) ASSERT_EQ(got[i], want[i].bits) << "n=" << n << " i=" << i;
      // and back: bf16 -> f32 is exact
      Buffer back = poisoned(DType::kF32, n);
      cuda::cast(gpu(), back.view().slice(offset, m), dst.view().slice(offset, m));
      const auto f = download<float>(back);
      for (std::int64_t i = offset; i < n; ++i) {
        const float w = bf16_to_float(want[i]);
        ASSERT_TRUE(std::memcmp(&f[i], &w, 4) == 0) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST_F(CudaElementwise, ResidualAndAccumulateMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    std::vector<float> a = rng.normal(n), b = rng.normal(n);
    std::vector<float> want(a.size());
    cpu::residual_forward(cpu_ctx(), view_of(want), view_of(a), view_of(b));
    Buffer da = upload(a), db = upload(b), out = poisoned(DType::kF32, n);
    cuda::residual_forward(gpu(), out.view(), da.view(), db.view());
    EXPECT_TRUE(bitwise_equal(download<float>(out), want)) << "n=" << n;

    std::vector<bf16> acc(a.size());
    cpu::cast(cpu_ctx(), view_of(acc), view_of(a));
    Buffer dacc = upload_bf16(a);
    cpu::accumulate_into(cpu_ctx(), view_of(acc), view_of(b));
    cuda::accumulate_into(gpu(), dacc.view(), db.view());
    const auto got = download<std::uint16_t>(dacc);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], acc[i].bits) << "n=" << n << " i=" << i;
  }
}

// Bitwise, except that a NaN only has to be a NaN: the GPU's arithmetic returns its canonical NaN
// whatever the operand's payload, the CPU's keeps the payload (found on the H200 at d650922).
bool same_bits_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

TEST_F(CudaElementwise, ScaleAndInt8BlocksMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    std::vector<float> x = rng.normal(n, 0.0f, 10.0f);
    if (n > 600) x[517] = NAN;  // its block decodes to NaN on both
    std::vector<float> scaled = x;
    cpu::scale(cpu_ctx(), view_of(scaled), 1.0f / 3.0f);
    Buffer dx = upload(x);
    cuda::scale(gpu(), dx.view(), 1.0f / 3.0f);
    EXPECT_TRUE(same_bits_or_both_nan(download<float>(dx), scaled)) << "scale n=" << n;

    const std::int64_t w = int8_blocks::packed_words(n);
    std::vector<std::int32_t> want(static_cast<std::size_t>(w));
    cpu::quantize_int8_blocks(cpu_ctx(), view_of(x), view_of(want));
    Buffer src = upload(x), packed = poisoned(DType::kI32, w);
    cuda::quantize_int8_blocks(gpu(), src.view(), packed.view());
    EXPECT_EQ(download<std::int32_t>(packed), want) << "packed words n=" << n;
    std::vector<float> decoded(x.size());
    cpu::dequantize_int8_blocks(cpu_ctx(), view_of(want), view_of(decoded), false);
    Buffer out = poisoned(DType::kF32, n);
    cuda::dequantize_int8_blocks(gpu(), packed.view(), out.view(), false);
    EXPECT_TRUE(same_bits_or_both_nan(download<float>(out), decoded)) << "decoded n=" << n;
  }
}

TEST_F(CudaElementwise, GeluForwardBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    std::vector<float> x = rng.normal(n, 0.0f, 3.0f), g = rng.normal(n);
    std::vector<float> want_y(x.size()), want_dx(x.size());
    cpu::gelu_forward(cpu_ctx(), view_of(want_y), view_of(x));
    cpu::gelu_backward(cpu_ctx(), view_of(want_dx), view_of(x), view_of(g));
    for (std::int64_t offset : {0, 1}) {
      if (offset >= n) continue;
      const std::int64_t m = n - offset;
      Buffer dx_in = upload(x), dg = upload(g), y = poisoned(DType::kF32, n), dx = poisoned(DType::kF32, n);
      cuda::gelu_forward(gpu(), y.view().slice(offset, m), dx_in.view().slice(offset, m));
      cuda::gelu_backward(gpu(), dx.view().slice(offset, m), dx_in.view().slice(offset, m), dg.view().slice(offset, m));
      auto got_y = download<float>(y), got_dx = download<float>(dx);
      std::vector<float> gy(got_y.begin() + offset, got_y.end()), gdx(got_dx.begin() + offset, got_dx.end());
      std::vector<float> wy(want_y.begin() + offset, want_y.end()), wdx(want_dx.begin() + offset, want_dx.end());
      EXPECT_TRUE(close_normwise(gy, to_double(wy), 1e-5)) << "n=" << n << " offset=" << offset;
      EXPECT_TRUE(close_normwise(gdx, to_double(wdx), 1e-5)) << "n=" << n << " offset=" << offset;
    }
  }
}

}  // namespace
}  // namespace zt::test
