// The CUDA element-wise and reduction kernels run on the CPU under the SIMT emulator ([Note: SIMT
// emulation] in simt_runtime.h), launched as their .cu files launch them, against the CPU kernels:
//   residual add (vector bulk + scalar tail), the bf16 accumulate and the fp32 scale: bitwise (one
//   rounding each);
//   dropout (both access widths, F32 and BF16): bitwise (the CPU's Philox mask, one product);
//   GELU forward and backward: 1e-5 normwise (expf against the CPU's polynomial), BF16 per element
//   within 2^-7 as well (emulation_util.h);
//   sum of squares (fp64 partials over a fixed grid): 1e-12 relative to the CPU's fp64 sum;
//   exact sum of squares (integer digits per block): the CPU's integer, digit for digit;
//   the linear layer's bias gradient (two-stage column sums, accumulated into dbias): 1e-5
//   normwise against fp64 column sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dropout.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/dropout_kernels.cuh"
#include "kernels/cuda/gelu_kernels.cuh"
#include "kernels/cuda/matmul_kernels.cuh"
#include "kernels/cuda/norm_kernels.cuh"
#include "kernels/cuda/residual_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

using namespace emulation;  // NOLINT: the emulation tests' shared helpers
namespace cd = cuda::detail;

constexpr int kThreads = 256;  // every kernel here is launched with 256 threads a block
static_assert(cd::gelu::kThreads == kThreads && cd::residual::kThreads == kThreads &&
              cd::dropout::kThreads == kThreads && cd::norm::kThreads == kThreads &&
              cd::matmul::kBiasThreads == kThreads);  // the bias gradient's partials; its sum: kPartialThreads

dim3 blocks_for(std::int64_t work) {
  return dim3(static_cast<unsigned>(std::max<std::int64_t>(1, (work + 255) / 256)));
}

template <typename T>
TensorView host_view(std::vector<T>& x) {
  return TensorView{x.data(), dtype_of<T>(), Device::kCPU, Shape{static_cast<std::int64_t>(x.size())}};
}

// n elements from element `offset` of each operand (offset 1: the scalar path only).
template <typename T>
void residual_case(Rng& rng, std::int64_t n, std::int64_t offset) {
  SCOPED_TRACE(::testing::Message() << "residual " << (dtype_of<T>() == DType::kF32 ? "F32" : "BF16") << " n=" << n
                                    << " offset=" << offset);
  std::vector<T> a = device_values<T>(rng.normal(n + offset)), b = device_values<T>(rng.normal(n + offset));
  std::vector<T> out = device_values<T>(std::vector<float>(static_cast<std::size_t>(n + offset), NAN)), ref = out;
  cpu::residual_forward(reference_ctx(), host_view(ref), host_view(a), host_view(b));
  // The launcher's choice for (un)aligned operands: 16-byte groups, then the scalar tail.
  constexpr int kWide = cd::kWideVec<T>;
  const std::int64_t groups = offset == 0 ? n / kWide : 0, bulk = kWide * groups;
  T *o = out.data() + offset, *pa = a.data() + offset, *pb = b.data() + offset;
  if (groups > 0) simt::launch(blocks_for(groups), kThreads, 0, cd::residual::add_vec<T, kWide>, o, pa, pb, groups);
  if (n > bulk) {
    simt::launch(blocks_for(n - bulk), kThreads, 0, cd::residual::add_vec<T, 1>, o + bulk, pa + bulk, pb + bulk,
                 n - bulk);
  }
  std::vector<T> got(out.begin() + offset, out.end()), want(ref.begin() + offset, ref.end());
  // ref was computed over the whole (offset + n) arrays; its first `offset` elements are not compared.
  EXPECT_TRUE(bitwise_equal(host_values(got), host_values(want)));
}

TEST(ElementwiseEmulation, ResidualAndBf16AccumulateMatchCpuBitwise) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {1, 7, 1030}) {
    for (std::int64_t off : {0, 1}) {
      residual_case<float>(rng, n, off);
      residual_case<bf16_dev>(rng, n, off);
    }
  }
  // The bf16 accumulate as its launcher runs it: groups of 8, then the tail one by one.
  const std::int64_t n = 999, bulk = n / 8 * 8;
  std::vector<float> src = rng.normal(n);
  std::vector<bf16_dev> dst = to_device_bf16(rng.normal(n)), ref = dst;
  cpu::accumulate_into(reference_ctx(), host_view(ref), host_view(src));
  simt::launch(blocks_for(bulk / 8), kThreads, 0, cd::residual::accumulate_bf16<8>, dst.data(),
               static_cast<const float*>(src.data()), bulk / 8);
  simt::launch(blocks_for(n - bulk), kThreads, 0, cd::residual::accumulate_bf16<1>, dst.data() + bulk,
               static_cast<const float*>(src.data()) + bulk, n - bulk);
  EXPECT_TRUE(bitwise_equal(widen(dst), widen(ref))) << "accumulate_bf16";
  // The average's scaling (one product each; 1/3 is not a power of two, so it rounds).
  std::vector<float> x = rng.normal(n), x_ref = x;
  cpu::scale(reference_ctx(), host_view(x_ref), 1.0f / 3.0f);
  simt::launch(blocks_for(n), kThreads, 0, cd::residual::scale_f32, x.data(), 1.0f / 3.0f, n);
  EXPECT_TRUE(bitwise_equal(x, x_ref)) << "scale_f32";
  expect_no_violations();
}

template <typename T, int kVec>
void dropout_case(Rng& rng, std::int64_t B, std::int64_t N) {
  SCOPED_TRACE(::testing::Message() << "dropout " << (dtype_of<T>() == DType::kF32 ? "F32" : "BF16") << " B=" << B
                                    << " N=" << N << " kVec=" << kVec);
  const DropoutSpec spec{0.3f, /*seed=*/12345, /*site=*/9, /*first_sample=*/(std::int64_t{1} << 33) + 3};
  std::vector<T> in = device_values<T>(rng.normal(B * N)), ref(in.size());
  // NaN as the output starts, with a guard past the last sample (emulation_util.h's guarded).
  const T nan = device_values<T>(std::vector<float>{NAN})[0];
  std::vector<T> out = guarded(in.size(), nan);
  const Shape bn{B, N};
  cpu::dropout_forward(reference_ctx(), TensorView{ref.data(), dtype_of<T>(), Device::kCPU, bn},
                       TensorView{in.data(), dtype_of<T>(), Device::kCPU, bn}, spec);
  constexpr int kPer = cd::dropout::kElementsPerThread<kVec>;
  simt::launch(blocks_for(B * ((N + kPer - 1) / kPer)), kThreads, 0, cd::dropout::apply_mask<T, kVec>, out.data(),
               static_cast<const T*>(in.data()), B, N, cd::mask_params(spec));
  ASSERT_TRUE(guard_kept(out, in.size(), nan));
  EXPECT_TRUE(bitwise_equal(host_values(out), host_values(ref)));
}

TEST(ElementwiseEmulation, DropoutMatchesCpuBitwise) {
  ZT_SEEDED_RNG(rng);
  dropout_case<float, 1>(rng, 3, 37);
  dropout_case<bf16_dev, 1>(rng, 3, 37);
  dropout_case<float, 4>(rng, 5, 256);
  dropout_case<bf16_dev, 8>(rng, 5, 256);
  dropout_case<bf16_dev, 8>(rng, 3, 40);  // 10 Philox blocks a sample: an odd count of 4-element blocks
  expect_no_violations();
}

template <typename T, int kVec>
void gelu_case(Rng& rng, std::int64_t n) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << "gelu " << (kBf16 ? "BF16" : "F32") << " n=" << n << " kVec=" << kVec);
  std::vector<T> x = device_values<T>(rng.normal(n, 0.0f, 3.0f)), g = device_values<T>(rng.normal(n));
  std::vector<T> out(x.size()), dinp(x.size());
  cpu::gelu_forward(reference_ctx(), host_view(out), host_view(x));
  cpu::gelu_backward(reference_ctx(), host_view(dinp), host_view(x), host_view(g));
  const std::vector<T> nan = device_values<T>(std::vector<float>(x.size(), NAN));
  std::vector<T> g_out = nan, g_dinp = nan;
  const dim3 grid = blocks_for((n + kVec - 1) / kVec);
  simt::launch(grid, kThreads, 0, cd::gelu::gelu_forward_kernel<T, kVec>, g_out.data(), static_cast<const T*>(x.data()),
               n);
  simt::launch(grid, kThreads, 0, cd::gelu::gelu_backward_kernel<T, kVec>, g_dinp.data(),
               static_cast<const T*>(x.data()), static_cast<const T*>(g.data()), n);
  EXPECT_TRUE(close_to_cpu(host_values(g_out), host_values(out), kBf16)) << "forward";
  EXPECT_TRUE(close_to_cpu(host_values(g_dinp), host_values(dinp), kBf16)) << "backward";
}

TEST(ElementwiseEmulation, GeluMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  // Single elements, and the launcher's 16-byte groups with a tail (1027 = 8 * 128 + 3).
  gelu_case<float, 1>(rng, 1027);
  gelu_case<bf16_dev, 1>(rng, 1027);
  gelu_case<float, 4>(rng, 1027);
  gelu_case<bf16_dev, 8>(rng, 1027);
  expect_no_violations();
}

// Views of one element type in one launch (a block row each), as the launcher groups them.
template <typename T, int kVec>
std::vector<double> emulated_square_sums(const std::vector<std::pair<const T*, std::int64_t>>& views) {
  namespace nm = cd::norm;
  const auto count = static_cast<std::int64_t>(views.size());
  std::vector<double> partials(static_cast<std::size_t>(count * nm::kPartialBlocks), NAN), sums(views.size(), NAN);
  nm::SquareSumViews<T> list{};
  for (std::size_t k = 0; k < views.size(); ++k) {
    list.x[k] = views[k].first, list.n[k] = views[k].second, list.slot[k] = static_cast<int>(k);
  }
  simt::launch(dim3(nm::kPartialBlocks, static_cast<unsigned>(count)), kThreads, 0, nm::partial_sums<T, kVec>,
               partials.data(), list);
  simt::launch(dim3(static_cast<unsigned>(count)), kThreads, 0, nm::final_sums, sums.data(),
               static_cast<const double*>(partials.data()));
  return sums;
}

TEST(ElementwiseEmulation, SumOfSquaresMatchesCpu) {
#ifdef ZT_EMULATION_UNDER_TSAN
  GTEST_SKIP() << "minutes under ThreadSanitizer (1024 emulated blocks a view); its only barriers are "
                  "block_sum's, which the cross-entropy test runs under ThreadSanitizer";
#endif
  ZT_SEEDED_RNG(rng);
  // Fewer elements than the grid's 262144 threads (BF16, with an empty view and a short one beside
  // it in the launch), and more (F32); the launcher's 16-byte groups, n not a multiple of them (a
  // tail as well). Each view emulates the whole fixed grid of 1024 blocks, the slowest thing here.
  const std::int64_t nb = 3001, nf = 300002, ns = 13;
  std::vector<float> xf = rng.normal(nf);
  const std::vector<float> xs = rng.normal(nb), xt = rng.normal(ns);
  std::vector<bf16_dev> b0 = to_device_bf16(xs), b1 = to_device_bf16(xt);
  const std::vector<double> bf = emulated_square_sums<bf16_dev, 8>({{b0.data(), nb}, {b1.data(), 0}, {b1.data(), ns}});
  const double ref_b0 = cpu::sum_of_squares(reference_ctx(), host_view(b0));
  const double ref_b1 = cpu::sum_of_squares(reference_ctx(), host_view(b1));
  EXPECT_NEAR(bf[0], ref_b0, 1e-12 * ref_b0) << "BF16, n=" << nb;
  EXPECT_EQ(bf[1], 0.0) << "an empty view";
  EXPECT_NEAR(bf[2], ref_b1, 1e-12 * ref_b1) << "BF16, n=" << ns;
  // A view's sum is its own launch's, bit for bit, whatever shares the launch (the order is the view's).
  const double alone = emulated_square_sums<bf16_dev, 8>({{b1.data(), ns}})[0];
  EXPECT_EQ(alone, bf[2]) << "batched vs alone";
  const double ref_f = cpu::sum_of_squares(reference_ctx(), host_view(xf));
  const double got_f = emulated_square_sums<float, 4>({{xf.data(), nf}})[0];
  EXPECT_NEAR(got_f, ref_f, 1e-12 * ref_f) << "F32, n=" << nf;
  expect_no_violations();
}

TEST(ElementwiseEmulation, ExactSumOfSquaresMatchesCpuInteger) {
#ifdef ZT_EMULATION_UNDER_TSAN
  GTEST_SKIP() << "its barriers are block_sum's, which the cross-entropy test runs under ThreadSanitizer";
#endif
  ZT_SEEDED_RNG(rng);
  namespace nm = cd::norm;
  for (auto [n, bf16] : {std::pair<std::int64_t, bool>{3001, true}, {20001, false}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    std::vector<float> x = rng.normal(n);
    for (std::int64_t i = 0; i < n; i += 7) x[static_cast<std::size_t>(i)] *= 1e-40f;  // subnormals too
    std::vector<bf16_dev> xb = to_device_bf16(x);
    // A smaller grid than the launcher's kExactBlocks (the kernels stride by the grid they get):
    // each emulated block's 21 block sums are the slowest thing here.
    constexpr int kBlocks = 12;
    std::vector<std::uint64_t> words(nm::kExactWords * (kBlocks + 1), 7);
    if (bf16) {
      simt::launch(dim3(kBlocks), kThreads, 0, nm::exact_partial_sums<bf16_dev>, words.data(),
                   static_cast<const bf16_dev*>(xb.data()), n);
    } else {
      simt::launch(dim3(kBlocks), kThreads, 0, nm::exact_partial_sums<float>, words.data(),
                   static_cast<const float*>(x.data()), n);
    }
    std::uint64_t* out = words.data() + nm::kExactWords * kBlocks;
    simt::launch(dim3(1), kThreads, 0, nm::exact_final_sum, out, static_cast<const std::uint64_t*>(words.data()),
                 kBlocks);
    exact_sum::SquareSum got;
    std::copy(out, out + exact_sum::kDigits, got.digit);
    got.nonfinite = out[exact_sum::kDigits];
    exact_sum::normalize(got.digit);
    const exact_sum::SquareSum want = bf16 ? cpu::exact_sum_of_squares(reference_ctx(), {host_view(xb)})
                                           : cpu::exact_sum_of_squares(reference_ctx(), {host_view(x)});
    EXPECT_TRUE(std::equal(got.digit, got.digit + exact_sum::kDigits, want.digit) && got.nonfinite == 0);
  }
  expect_no_violations();
}

// The bias gradient's sums in the kernels' own order, in fp32 (so the emulated kernels must match
// it bit for bit): a chunk's partial adds row group y's rows r0 + y, r0 + y + kBiasRowGroups, ...
// and then the row groups in order; the final pass has warp w add chunks w, w + kPartialWarps, ...
// and then the warps in order, into dbias0.
std::vector<float> bias_sums_in_kernel_order(const std::vector<float>& dout, std::int64_t N, int OC,
                                             const std::vector<float>& dbias0) {
  namespace mm = cd::matmul;
  const std::int64_t chunks = (N + mm::kBiasRowsPerChunk - 1) / mm::kBiasRowsPerChunk;
  std::vector<float> out(dbias0);
  for (int c = 0; c < OC; ++c) {
    std::vector<float> partial(static_cast<std::size_t>(chunks));
    for (std::int64_t k = 0; k < chunks; ++k) {
      const std::int64_t r0 = k * mm::kBiasRowsPerChunk, r1 = std::min(N, r0 + mm::kBiasRowsPerChunk);
      float chunk = 0.0f;
      for (int y = 0; y < mm::kBiasRowGroups; ++y) {
        float group = 0.0f;
        for (std::int64_t r = r0 + y; r < r1; r += mm::kBiasRowGroups)
          group += dout[static_cast<std::size_t>(r * OC + c)];
        chunk += group;
      }
      partial[static_cast<std::size_t>(k)] = chunk;
    }
    float total = 0.0f;
    for (int w = 0; w < cd::kPartialWarps; ++w) {
      float warp = 0.0f;
      for (std::int64_t k = w; k < chunks; k += cd::kPartialWarps) warp += partial[static_cast<std::size_t>(k)];
      total += warp;
    }
    out[static_cast<std::size_t>(c)] += total;
  }
  return out;
}

template <typename T>
void bias_case(Rng& rng, std::int64_t N, int OC, int width) {
  SCOPED_TRACE(::testing::Message() << "bias grad " << (dtype_of<T>() == DType::kF32 ? "F32" : "BF16") << " N=" << N
                                    << " OC=" << OC << " columns a thread " << width);
  const std::vector<T> dout = device_values<T>(rng.normal(N * OC));
  const std::vector<float> dout_f = host_values(dout), dbias0 = rng.normal(OC);
  std::vector<double> ref(dbias0.begin(), dbias0.end());
  for (std::int64_t r = 0; r < N; ++r)
    for (int c = 0; c < OC; ++c) ref[c] += dout_f[static_cast<std::size_t>(r * OC + c)];
  const std::int64_t chunks = (N + cd::matmul::kBiasRowsPerChunk - 1) / cd::matmul::kBiasRowsPerChunk;
  // As matmul.cu launches them: the partials on blocks of kBiasThreads, their sum on blocks of
  // kPartialThreads over kPartialColumns columns.
  const dim3 sum_grid(cd::partial_blocks(OC));
  auto run = [&] {
    std::vector<float> partials(static_cast<std::size_t>(chunks * OC), NAN), dbias = dbias0;
    const unsigned groups = static_cast<unsigned>((OC + width - 1) / width);
    const dim3 grid((groups + cd::matmul::kBiasColGroups - 1) / cd::matmul::kBiasColGroups,
                    static_cast<unsigned>(chunks));
    if (width > 1) {
      simt::launch(grid, cd::matmul::kBiasThreads, 0, cd::matmul::bias_grad_partials<T, cd::kWideVec<T>>,
                   partials.data(), dout.data(), N, OC);
    } else {
      simt::launch(grid, cd::matmul::kBiasThreads, 0, cd::matmul::bias_grad_partials<T, 1>, partials.data(),
                   dout.data(), N, OC);
    }
    simt::launch(sum_grid, cd::kPartialThreads, 0, cd::matmul::bias_grad_accumulate<float>, dbias.data(),
                 static_cast<const float*>(partials.data()), static_cast<int>(chunks), OC);
    // Added in place into bf16 storage (ParamStore::in_place_grads) from the same partials: each
    // element round(widen(old) + the sum the fp32 kernel adds to zero).
    std::vector<float> sum(static_cast<std::size_t>(OC), 0.0f);
    simt::launch(sum_grid, cd::kPartialThreads, 0, cd::matmul::bias_grad_accumulate<float>, sum.data(),
                 static_cast<const float*>(partials.data()), static_cast<int>(chunks), OC);
    std::vector<bf16_dev> b = to_device_bf16(dbias0);
    const std::vector<float> old = widen(b);
    simt::launch(sum_grid, cd::kPartialThreads, 0, cd::matmul::bias_grad_accumulate<bf16_dev>, b.data(),
                 static_cast<const float*>(partials.data()), static_cast<int>(chunks), OC);
    std::vector<float> want(old.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = round_to_bf16(old[i] + sum[i]);
    EXPECT_TRUE(bitwise_equal(widen(b), want)) << "bf16 dbias";
    return dbias;
  };
  const std::vector<float> dbias = run();
  EXPECT_TRUE(close_normwise(dbias, ref, 1e-5));
  EXPECT_TRUE(bitwise_equal(dbias, bias_sums_in_kernel_order(dout_f, N, OC, dbias0))) << "the stated order";
  EXPECT_EQ(run(), dbias) << "a fixed summation order: the same bits again";
}

TEST(ElementwiseEmulation, BiasGradientMatchesColumnSums) {
  ZT_SEEDED_RNG(rng);
  // Five row chunks of 128 (the last short), 296 columns: partials blocks of 32 16-byte groups (4
  // columns of fp32: three blocks, 8 of bf16: two, the last partly idle), ten of single columns;
  // the sum's blocks of 32 columns, ten (the last partly idle), most of their 16 warps without a
  // chunk.
  bias_case<float>(rng, 600, 296, 1);
  bias_case<bf16_dev>(rng, 600, 296, 1);
  bias_case<float>(rng, 600, 296, 4);
  bias_case<bf16_dev>(rng, 600, 296, 8);
  bias_case<float>(rng, 1, 1, 1);
  bias_case<bf16_dev>(rng, 3, 8, 8);
  // 37 chunks: each warp of the sum adds two or three of them.
  bias_case<bf16_dev>(rng, 37 * 128 - 5, 40, 8);
  expect_no_violations();
}

}  // namespace
}  // namespace zt::test
