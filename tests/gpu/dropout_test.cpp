// CUDA dropout against the CPU kernel (label gpu). The mask is a pure function of (seed, site,
// sample, element) and applying it is one multiply per element, so the GPU must match the CPU bit
// for bit: the same elements dropped, the same 1 / (1 - p) on the kept ones. Sizes cover samples
// whose length is a multiple of 4 (one float4 per Philox block at offset 0), odd lengths and a view
// one float off alignment (the single-float kernel), sample indices past 2^32 (the counter's high
// word), and out aliasing in.
#include <cmath>

#include "kernels/cpu/dropout.h"
#include "kernels/cuda/dropout.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaDropout = GpuKernelTest;

DropoutSpec spec_of(float p, std::int64_t first_sample) {
  return DropoutSpec{p, /*seed=*/0x0123456789ABCDEFull, /*site=*/7, first_sample};
}

TEST_F(CudaDropout, ForwardAndBackwardMatchCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, N;
  };
  for (auto [B, N] : {S{1, 1}, S{3, 7}, S{2, 8}, S{4, 1000}, S{2, 4099}, S{3, 1 << 14}}) {
    for (float p : {0.1f, 0.5f, 0.9f}) {
      for (std::int64_t first_sample : {std::int64_t{3}, (std::int64_t{1} << 33) + 5}) {
        for (std::int64_t offset : {0, 1}) {
          SCOPED_TRACE(::testing::Message() << "B=" << B << " N=" << N << " p=" << p << " first_sample=" << first_sample
                                            << " offset=" << offset);
          const DropoutSpec spec = spec_of(p, first_sample);
          const Shape shape{B, N};
          std::vector<float> x = rng.normal(B * N);
          std::vector<float> want(x.size()), want_back(x.size());
          cpu::dropout_forward(cpu_ctx(), view_of(want, shape), view_of(x, shape), spec);
          cpu::dropout_backward(cpu_ctx(), view_of(want_back, shape), view_of(x, shape), spec);
          EXPECT_TRUE(bitwise_equal(want, want_back)) << "the CPU's forward and backward masks differ";

          Buffer in = upload_at(offset, x), out = poisoned(DType::kF32, offset + B * N);
          cuda::dropout_forward(gpu(), view_at(out, offset, shape), view_at(in, offset, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_from(out, offset), want)) << "forward";
          Buffer dinp = poisoned(DType::kF32, offset + B * N);
          cuda::dropout_backward(gpu(), view_at(dinp, offset, shape), view_at(in, offset, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_from(dinp, offset), want)) << "backward";
          // In place, as the model applies it to the residual branches.
          cuda::dropout_forward(gpu(), view_at(in, offset, shape), view_at(in, offset, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_from(in, offset), want)) << "in place";
        }
      }
    }
  }
}

// About p of the elements are dropped, and which ones depends on the sample index (rows of
// different samples differ) and on the site: a mask that ignored either would pass the bitwise
// test above only if the CPU had the same defect, so state the property directly.
TEST_F(CudaDropout, DropsAboutPAndDependsOnSampleAndSite) {
  const std::int64_t B = 2, N = 1 << 16;
  const float p = 0.25f;
  Buffer ones = upload(std::vector<float>(B * N, 1.0f)), out = poisoned(DType::kF32, B * N);
  cuda::dropout_forward(gpu(), out.view(Shape{B, N}), ones.view(Shape{B, N}), spec_of(p, 11));
  const std::vector<float> a = download<float>(out);
  DropoutSpec other_site = spec_of(p, 11);
  other_site.site = 8;
  cuda::dropout_forward(gpu(), out.view(Shape{B, N}), ones.view(Shape{B, N}), other_site);
  const std::vector<float> c = download<float>(out);
  std::int64_t dropped = 0, rows_differ = 0, sites_differ = 0;
  for (std::int64_t j = 0; j < N; ++j) {
    for (std::int64_t b = 0; b < B; ++b) {
      const float v = a[b * N + j];
      ASSERT_TRUE(v == 0.0f || v == 1.0f / (1.0f - p)) << "element " << b * N + j << " is " << v;
      dropped += v == 0.0f;
      sites_differ += v != c[b * N + j];
    }
    rows_differ += a[j] != a[N + j];
  }
  // Binomial(2^17, 0.25): standard deviation ~157 elements; allow 6 of them.
  EXPECT_NEAR(static_cast<double>(dropped), p * B * N, 6 * std::sqrt(p * (1 - p) * B * N));
  EXPECT_GT(rows_differ, N / 4) << "two samples got (nearly) the same mask";
  EXPECT_GT(sites_differ, B * N / 4) << "two sites got (nearly) the same mask";
}

TEST_F(CudaDropout, InactiveIsTheIdentityAndDroppedInfBecomesNan) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 3, N = 37;
  std::vector<float> x = rng.normal(B * N);
  Buffer in = upload(x), out = poisoned(DType::kF32, B * N);
  cuda::dropout_forward(gpu(), out.view(Shape{B, N}), in.view(Shape{B, N}), spec_of(0.0f, 0));
  EXPECT_TRUE(bitwise_equal(download<float>(out), x)) << "p = 0 must copy exactly";

  // The mask is multiplied in, as on the CPU (and as PyTorch does): a dropped inf gives NaN, a
  // kept one stays inf.
  std::fill(x.begin(), x.end(), INFINITY);
  const DropoutSpec spec = spec_of(0.5f, 2);
  std::vector<float> want(x.size());
  cpu::dropout_forward(cpu_ctx(), view_of(want, Shape{B, N}), view_of(x, Shape{B, N}), spec);
  Buffer inf = upload(x);
  cuda::dropout_forward(gpu(), out.view(Shape{B, N}), inf.view(Shape{B, N}), spec);
  const std::vector<float> got = download<float>(out);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i;
    if (!std::isnan(want[i])) {
      EXPECT_EQ(got[i], want[i]) << i;
    }
  }
}

TEST_F(CudaDropout, BadOperandsAreRefused) {
  Buffer a = poisoned(DType::kF32, 8), b = poisoned(DType::kF32, 7);
  EXPECT_THROW(cuda::dropout_forward(gpu(), b.view(Shape{1, 7}), a.view(Shape{1, 8}), spec_of(0.5f, 0)), InternalError);
  EXPECT_THROW(cuda::dropout_forward(gpu(), a.view(Shape{2, 4}), a.view(Shape{2, 4}), spec_of(1.0f, 0)), InternalError);
  std::vector<float> host(8);
  EXPECT_THROW(cuda::dropout_forward(gpu(), a.view(Shape{2, 4}), view_of(host, Shape{2, 4}), spec_of(0.5f, 0)),
               InternalError);
}

}  // namespace
}  // namespace zt::test
