// CUDA AdamW and sum of squares against the CPU kernels (label gpu). AdamW is written with explicit
// rounding intrinsics so it must equal the CPU update bit for bit (every grad/working dtype pair).
// The sum of squares adds in a different fixed order in fp64: the two differ by at most about
// n * 2^-53 relative (n <= 2^20 here: < 1.2e-10), and two GPU runs must agree bitwise. The exact
// sum of squares is an integer: equal to the CPU's.
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/norm.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/norm.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaOptim = GpuKernelTest;

TEST_F(CudaOptim, AdamWMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  AdamWHyper hyper;
  hyper.lr = 6e-4f;
  hyper.weight_decay = 0.1f;
  for (std::int64_t n : {1, 1000, 65537}) {
    for (DType grad_dtype : {DType::kF32, DType::kBF16}) {
      for (int working : {0, 1, 2}) {  // none, F32, BF16
        std::vector<float> p = rng.normal(n), g = rng.normal(n, 0.0f, 0.01f), m = rng.normal(n, 0.0f, 0.01f),
                           v = rng.uniform(n, 0.0f, 1e-4f);
        std::vector<bf16> g16(g.size());
        cpu::cast(cpu_ctx(), view_of(g16), view_of(g));
        Buffer dp = upload(p), dm = upload(m), dv = upload(v);
        Buffer dg = grad_dtype == DType::kF32 ? upload(g) : upload_bf16(g);
        const DType wdt = working == 2 ? DType::kBF16 : DType::kF32;
        Buffer dw = working == 0 ? Buffer() : poisoned(wdt, n);
        std::vector<float> wf(working == 1 ? n : 0);
        std::vector<bf16> wb(working == 2 ? n : 0);
        TensorView cpu_w = working == 1 ? view_of(wf) : working == 2 ? view_of(wb) : TensorView{};
        TensorView cpu_g = grad_dtype == DType::kF32 ? view_of(g) : view_of(g16);
        for (int step = 1; step <= 3; ++step) {
          cpu::adamw_update(cpu_ctx(), view_of(p), cpu_g, view_of(m), view_of(v), cpu_w, hyper, step, 0.5f);
          cuda::adamw_update(gpu(), dp.view(), dg.view(), dm.view(), dv.view(), working == 0 ? TensorView{} : dw.view(),
                             hyper, step, 0.5f);
        }
        SCOPED_TRACE(::testing::Message() << "n=" << n << " grad " << dtype_name(grad_dtype) << " working " << working);
        EXPECT_TRUE(bitwise_equal(download<float>(dp), p));
        EXPECT_TRUE(bitwise_equal(download<float>(dm), m));
        EXPECT_TRUE(bitwise_equal(download<float>(dv), v));
        if (working == 1) {
          EXPECT_TRUE(bitwise_equal(download<float>(dw), wf));
        }
        if (working == 2) {
          const auto got = download<std::uint16_t>(dw);
          for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], wb[i].bits) << i;
        }
      }
    }
  }
}

// The optimizer updates shard slices of parameters, which may start anywhere: the kernel takes
// 16-byte groups only where every operand is aligned, element by element otherwise (and for the
// tail). Slices at offsets 1-4 of each buffer, bf16 grads and working copy: still bit for bit.
TEST_F(CudaOptim, AdamWOnSlicesAtAnyOffsetMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  AdamWHyper hyper;
  hyper.lr = 6e-4f;
  hyper.weight_decay = 0.1f;
  const std::int64_t n = 1001;
  for (std::int64_t off : {1, 2, 3, 4}) {
    const std::int64_t total = n + off;
    std::vector<float> p = rng.normal(total), g = rng.normal(total, 0.0f, 0.01f), m = rng.normal(total, 0.0f, 0.01f),
                       v = rng.uniform(total, 0.0f, 1e-4f);
    std::vector<bf16> g16(g.size()), wb(g.size());
    cpu::cast(cpu_ctx(), view_of(g16), view_of(g));
    Buffer dp = upload(p), dm = upload(m), dv = upload(v), dg = upload_bf16(g), dw = poisoned(DType::kBF16, total);
    for (int step = 1; step <= 2; ++step) {
      cpu::adamw_update(cpu_ctx(), view_of(p).slice(off, n), view_of(g16).slice(off, n), view_of(m).slice(off, n),
                        view_of(v).slice(off, n), view_of(wb).slice(off, n), hyper, step, 1.0f);
      cuda::adamw_update(gpu(), dp.view().slice(off, n), dg.view().slice(off, n), dm.view().slice(off, n),
                         dv.view().slice(off, n), dw.view().slice(off, n), hyper, step, 1.0f);
    }
    SCOPED_TRACE(::testing::Message() << "offset " << off);
    EXPECT_TRUE(bitwise_equal(download<float>(dp), p));
    EXPECT_TRUE(bitwise_equal(download<float>(dm), m));
    EXPECT_TRUE(bitwise_equal(download<float>(dv), v));
    const auto got = download<std::uint16_t>(dw);
    for (std::int64_t i = off; i < total; ++i) ASSERT_EQ(got[i], wb[i].bits) << i;
  }
}

// The multi-tensor launch: 61 slices (two tables of 48, so the flush between launches is crossed)
// of lengths 1 to 9000 (several 4096-element chunks, odd tails) at offsets 0-3 of one buffer so
// some take 16-byte groups and some not, alternating decay: bit for bit the CPU's per-slice update,
// and the gaps between slices (poisoned working copy) left unwritten.
TEST_F(CudaOptim, AdamWSlicesMatchCpuBitForBitAcrossLaunches) {
  ZT_SEEDED_RNG(rng);
  AdamWHyper hyper;
  hyper.lr = 6e-4f;
  hyper.weight_decay = 0.1f;
  struct Range {
    std::int64_t at, n;
  };
  std::vector<Range> ranges;
  std::int64_t total = 0;
  for (int i = 0; i < 61; ++i) {
    const std::int64_t n = i % 7 == 0 ? 9000 : 1 + (i * 37) % 300;
    total += i % 4;  // a gap of 0-3 elements: the next slice starts at varying alignment
    ranges.push_back(Range{total, n});
    total += n;
  }
  std::vector<float> p = rng.normal(total), g = rng.normal(total, 0.0f, 0.01f), m = rng.normal(total, 0.0f, 0.01f),
                     v = rng.uniform(total, 0.0f, 1e-4f);
  std::vector<bf16> g16(g.size());
  cpu::cast(cpu_ctx(), view_of(g16), view_of(g));
  std::vector<bf16> wb(g.size());
  Buffer dp = upload(p), dm = upload(m), dv = upload(v), dg = upload_bf16(g), dw = poisoned(DType::kBF16, total);
  const auto dw_before = download<std::uint16_t>(dw);
  std::vector<AdamWSlice> cpu_slices, gpu_slices;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const auto [at, n] = ranges[i];
    const bool decays = i % 2 == 0;
    cpu_slices.push_back(AdamWSlice{view_of(p).slice(at, n), view_of(g16).slice(at, n), view_of(m).slice(at, n),
                                    view_of(v).slice(at, n), view_of(wb).slice(at, n), decays});
    gpu_slices.push_back(AdamWSlice{dp.view().slice(at, n), dg.view().slice(at, n), dm.view().slice(at, n),
                                    dv.view().slice(at, n), dw.view().slice(at, n), decays});
  }
  for (int step = 1; step <= 2; ++step) {
    cpu::adamw_update_slices(cpu_ctx(), cpu_slices, hyper, step, 0.75f);
    cuda::adamw_update_slices(gpu(), gpu_slices, hyper, step, 0.75f);
  }
  EXPECT_TRUE(bitwise_equal(download<float>(dp), p));
  EXPECT_TRUE(bitwise_equal(download<float>(dm), m));
  EXPECT_TRUE(bitwise_equal(download<float>(dv), v));
  const auto got = download<std::uint16_t>(dw);
  std::vector<bool> in_slice(static_cast<std::size_t>(total), false);
  for (const Range& r : ranges) {
    for (std::int64_t i = r.at; i < r.at + r.n; ++i) in_slice[static_cast<std::size_t>(i)] = true;
  }
  for (std::int64_t i = 0; i < total; ++i) {
    const auto k = static_cast<std::size_t>(i);
    ASSERT_EQ(got[k], in_slice[k] ? wb[k].bits : dw_before[k]) << i;
  }
}

TEST_F(CudaOptim, SumOfSquaresMatchesCpuAndRepeatsBitwise) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 4097, 1 << 20}) {
    std::vector<float> x = rng.normal(n);
    const double want = cpu::sum_of_squares(cpu_ctx(), view_of(x));
    Buffer dx = upload(x), dx16 = upload_bf16(x);
    const double got = cuda::sum_of_squares(gpu(), dx.view());
    EXPECT_NEAR(got, want, 1.2e-10 * want) << "n=" << n;
    EXPECT_EQ(cuda::sum_of_squares(gpu(), dx.view()), got) << "two runs differ, n=" << n;
    std::vector<bf16> x16(x.size());
    cpu::cast(cpu_ctx(), view_of(x16), view_of(x));
    const double want16 = cpu::sum_of_squares(cpu_ctx(), view_of(x16));
    EXPECT_NEAR(cuda::sum_of_squares(gpu(), dx16.view()), want16, 1.2e-10 * want16) << "bf16, n=" << n;
  }
}

// The gradient norm's batched form: each view's sum bit for bit as its own call gives it, in
// order, with an empty view's sum 0, F32 and BF16 views mixed in one call, views at offsets that
// take the one-element loads, and more views than one launch takes (kViewsPerLaunch).
TEST_F(CudaOptim, SumOfSquaresEachEqualsOneCallPerView) {
  ZT_SEEDED_RNG(rng);
  const std::vector<float> a = rng.normal(4097), b = rng.normal(1 << 18), c = rng.normal(5);
  Buffer da = upload(a), db = upload_bf16(b), dc = upload(c);
  std::vector<TensorView> views = {da.view(), db.view(), da.view().slice(0, 0), dc.view(), da.view()};
  for (std::int64_t k = 1; k <= 36; ++k) {
    views.push_back(k % 2 == 0 ? da.view().slice(k, 4097 - k) : db.view().slice(k, 1000 + k));
  }
  // Launches group the views by type and alignment: 40 more F32 views 16-byte aligned (offsets
  // that are multiples of 4 floats), so one group passes kViewsPerLaunch (32, norm_kernels.cuh)
  // and takes a second launch.
  for (std::int64_t k = 0; k < 40; ++k) views.push_back(da.view().slice(4 * (k % 8), 2048 + 16 * k));
  const std::vector<double> each = cuda::sum_of_squares_each(gpu(), views);
  ASSERT_EQ(each.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    const double alone = views[i].numel() == 0 ? 0.0 : cuda::sum_of_squares(gpu(), views[i]);
    EXPECT_EQ(each[i], alone) << "view " << i;
  }
  EXPECT_GT(each[1], 0.0);
}

// Deterministic mode's norm: the GPU's exact sum is the CPU's integer, digit for digit, for F32 and
// BF16 views (subnormals and large values among them) in one call.
TEST_F(CudaOptim, ExactSumOfSquaresEqualsCpuInteger) {
  ZT_SEEDED_RNG(rng);
  std::vector<float> a = rng.normal(1 << 20), b = rng.normal(4097);
  for (std::size_t i = 0; i < a.size(); i += 5) a[i] *= (i % 2 == 0) ? 1e-40f : 1e30f;
  std::vector<bf16> b16(b.size());
  cpu::cast(cpu_ctx(), view_of(b16), view_of(b));
  Buffer da = upload(a), db = upload_bf16(b);
  const exact_sum::SquareSum got = cuda::exact_sum_of_squares(gpu(), {da.view(), db.view(), da.view().slice(0, 0)});
  const exact_sum::SquareSum want = cpu::exact_sum_of_squares(cpu_ctx(), {view_of(a), view_of(b16)});
  for (int k = 0; k < exact_sum::kDigits; ++k) EXPECT_EQ(got.digit[k], want.digit[k]) << "digit " << k;
  EXPECT_EQ(got.nonfinite, 0u);
}

}  // namespace
}  // namespace zt::test
