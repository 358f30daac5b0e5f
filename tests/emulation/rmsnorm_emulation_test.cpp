// The CUDA RMSNorm kernels (kernels/cuda/rmsnorm_kernels.cuh) run on the CPU under the SIMT
// emulator, as rmsnorm.cu launches them, against the CPU kernels: the forward, the chunked
// backward (a warp a row, and a block a row for wide rows) and its weight-gradient pass, both
// vector widths, F32 and BF16 activations, F32 and
// (with BF16 activations) BF16 weights. Tolerances of the LayerNorm emulation test: 1e-5
// normwise for fp32 results; BF16 results also within 2^-7 of the CPU's per element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/rmsnorm.h"
#include "kernels/cuda/rmsnorm_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace rms = cuda::detail::rms;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

constexpr float kEps = 1e-5f;

template <typename T, typename P, int kVec>
void run_rms_shape(Rng& rng, std::int64_t N, std::int64_t C) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " activations, "
                                    << (std::is_same_v<P, float> ? "F32" : "BF16") << " weight, N=" << N << " C=" << C
                                    << " kVec=" << kVec);
  const DType dt = dtype_of<T>(), pt = dtype_of<P>();
  const Shape nc{N, C};
  std::vector<T> x = device_values<T>(rng.normal(N * C, 0.5f, 2.0f)), dout = device_values<T>(rng.normal(N * C));
  std::vector<P> w = device_values<P>(rng.normal(C, 1.0f, 0.3f));
  const std::vector<T> dinp0 = device_values<T>(rng.normal(N * C));
  const std::vector<float> dw0 = rng.normal(C);

  std::vector<T> out_c(x.size()), dinp_c = dinp0;
  std::vector<float> rstd_c(N), dw_c = dw0;
  const TensorView wv{w.data(), pt, Device::kCPU, Shape{C}};
  cpu::rmsnorm_forward(reference_ctx(), TensorView{out_c.data(), dt, Device::kCPU, nc}, view_of(rstd_c),
                       TensorView{x.data(), dt, Device::kCPU, nc}, wv, kEps);
  cpu::rmsnorm_backward(reference_ctx(), TensorView{dinp_c.data(), dt, Device::kCPU, nc}, view_of(dw_c),
                        TensorView{dout.data(), dt, Device::kCPU, nc}, TensorView{x.data(), dt, Device::kCPU, nc}, wv,
                        view_of(rstd_c));

  std::vector<T> out_g = device_values<T>(std::vector<float>(x.size(), NAN)), dinp_g = dinp0;
  std::vector<float> rstd_g(N, NAN), dw_g = dw0;
  const auto fwd_blocks = static_cast<unsigned>((N + rms::kForwardWarps - 1) / rms::kForwardWarps);
  simt::launch(dim3(fwd_blocks), rms::kForwardWarps * 32, 0, rms::rmsnorm_forward_kernel<T, P, kVec>, out_g.data(),
               rstd_g.data(), x.data(), w.data(), N, static_cast<int>(C), kEps);
  EXPECT_TRUE(close_to_cpu(host_values(out_g), host_values(out_c), kBf16)) << "out";
  EXPECT_TRUE(close_to_cpu(rstd_g, rstd_c, false)) << "rstd";
  // The launcher's whole-row forward where a lane's groups fit its registers: the same bits, also
  // in place (out = inp).
  if constexpr (kVec > 1) {
    if (C / kVec <= rms::kWholeRowGroups * 32) {
      std::vector<T> out_w = device_values<T>(std::vector<float>(x.size(), NAN)), in_place = x;
      std::vector<float> rstd_w(N, NAN), rstd_p(N, NAN);
      simt::launch(dim3(fwd_blocks), rms::kForwardWarps * 32, 0, rms::rmsnorm_forward_kernel<T, P, kVec, true>,
                   out_w.data(), rstd_w.data(), x.data(), w.data(), N, static_cast<int>(C), kEps);
      simt::launch(dim3(fwd_blocks), rms::kForwardWarps * 32, 0, rms::rmsnorm_forward_kernel<T, P, kVec, true>,
                   in_place.data(), rstd_p.data(), in_place.data(), w.data(), N, static_cast<int>(C), kEps);
      EXPECT_TRUE(bitwise_equal(host_values(out_w), host_values(out_g))) << "out, whole rows in registers";
      EXPECT_TRUE(bitwise_equal(host_values(in_place), host_values(out_g))) << "out in place, whole rows";
      EXPECT_TRUE(bitwise_equal(rstd_w, rstd_g) && bitwise_equal(rstd_p, rstd_g)) << "rstd, whole rows";
    }
  }
  const std::int64_t chunks = (N + rms::kRowsPerChunk - 1) / rms::kRowsPerChunk;
  std::vector<float> partials(static_cast<std::size_t>(chunks * C), NAN);
  simt::launch(dim3(static_cast<unsigned>(chunks)), rms::kBackwardThreads, 0, rms::rmsnorm_backward_chunk<T, P, kVec>,
               dinp_g.data(), partials.data(), dout.data(), x.data(), w.data(), rstd_c.data(), N, static_cast<int>(C));
  // The launcher's whole-row variant where a row fits in one batch of loads: the same bits.
  if constexpr (kVec > 1) {
    if (C / kVec <= cuda::detail::kRowBatch * 32) {
      std::vector<T> dinp_w = dinp0;
      std::vector<float> partials_w(partials.size(), NAN);
      simt::launch(dim3(static_cast<unsigned>(chunks)), rms::kBackwardThreads, 0,
                   rms::rmsnorm_backward_chunk<T, P, kVec, true>, dinp_w.data(), partials_w.data(), dout.data(),
                   x.data(), w.data(), rstd_c.data(), N, static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(host_values(dinp_w), host_values(dinp_g))) << "dinp, whole rows in registers";
      EXPECT_TRUE(bitwise_equal(partials_w, partials)) << "partials, whole rows in registers";
    }
  }
  // The launcher's default for 16-byte rows of up to 512 groups, a block a row ([Note: a block a
  // row]): the column pass's partials bit for bit, dinp within the CPU's bounds (another order of
  // the row's sum).
  if constexpr (kVec > 1) {
    const std::int64_t groups = C / kVec;
    if (groups <= cuda::detail::kBlockRowMaxGroups) {
      std::vector<T> dinp_b = dinp0;
      std::vector<float> partials_b(partials.size(), NAN);
      const float* no_mean = nullptr;
      const auto kernel =
          cuda::detail::block_rows_kernel<rms::RmsNormRows<kVec>, T, P, kVec, rms::kRowsPerChunk>(groups);
      simt::launch(dim3(static_cast<unsigned>(chunks)), cuda::detail::block_row_threads(groups), 0, kernel,
                   dinp_b.data(), partials_b.data(), dout.data(), x.data(), w.data(), no_mean, rstd_c.data(), N,
                   static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(partials_b, partials)) << "partials, a block a row";
      EXPECT_TRUE(close_to_cpu(host_values(dinp_b), host_values(dinp_c), kBf16)) << "dinp, a block a row";
    }
  }
  simt::launch(dim3(cuda::detail::partial_blocks(C)), cuda::detail::kPartialThreads, 0,
               rms::rmsnorm_backward_params<float>, dw_g.data(), partials.data(), chunks, static_cast<int>(C));
  EXPECT_TRUE(close_to_cpu(host_values(dinp_g), host_values(dinp_c), kBf16)) << "dinp";
  EXPECT_TRUE(close_to_cpu(dw_g, dw_c, false)) << "dweight";
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(RmsNormEmulation, ForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  run_rms_shape<float, float, 1>(rng, 5, 37);
  run_rms_shape<bf16_dev, float, 1>(rng, 5, 37);
  run_rms_shape<float, float, 4>(rng, 70, 64);  // three backward chunks, the last partial
  run_rms_shape<bf16_dev, float, 8>(rng, 40, 96);
  run_rms_shape<bf16_dev, bf16_dev, 8>(rng, 40, 96);
  run_rms_shape<float, float, 1>(rng, 600, 40);  // 19 chunks, more than the parameter pass's 16 warps
  // Rows of three batches of loads, the last partial (258 groups of 8; Llama 3.2 1B's 2048 is two):
  // also two groups a thread a block a row, and Llama's own width (one group a thread; 37 rows,
  // the last chunk's batch partial), fp32 at two groups a thread and bf16 with idle threads.
  run_rms_shape<bf16_dev, bf16_dev, 8>(rng, 33, 2064);
  run_rms_shape<bf16_dev, float, 8>(rng, 37, 2048);
  run_rms_shape<float, float, 4>(rng, 35, 1028);
  run_rms_shape<bf16_dev, float, 8>(rng, 9, 1040);
}

// A row whose mean square overflows float (values of +-1e20) normalizes to NaN on the CPU and in
// both CUDA forwards (kernels/contracts/norm_row_scale.h), never to zeros (a scale of 0, a finite
// loss no check sees). The row beside it stays as it was.
template <typename T, typename P, int kVec>
void expect_overflowed_rms_row_nan() {
  SCOPED_TRACE(::testing::Message() << (std::is_same_v<T, float> ? "F32" : "BF16") << " activations, kVec=" << kVec);
  constexpr std::int64_t N = 2, C = 64;
  std::vector<T> x = device_values<T>(overflowing_then_plain_rows(C)), out_c(x.size());
  std::vector<P> w = device_values<P>(std::vector<float>(C, 1.0f));
  std::vector<float> rstd_c(N);
  const DType dt = dtype_of<T>();
  cpu::rmsnorm_forward(reference_ctx(), TensorView{out_c.data(), dt, Device::kCPU, Shape{N, C}}, view_of(rstd_c),
                       TensorView{x.data(), dt, Device::kCPU, Shape{N, C}},
                       TensorView{w.data(), dtype_of<P>(), Device::kCPU, Shape{C}}, kEps);
  const auto blocks = static_cast<unsigned>((N + rms::kForwardWarps - 1) / rms::kForwardWarps);
  for (const bool whole : {false, true}) {
    std::vector<T> out_g = device_values<T>(std::vector<float>(x.size(), 0.0f));
    std::vector<float> rstd_g(N, 0.0f);
    auto kernel = whole ? rms::rmsnorm_forward_kernel<T, P, kVec, true> : rms::rmsnorm_forward_kernel<T, P, kVec>;
    simt::launch(dim3(blocks), rms::kForwardWarps * 32, 0, kernel, out_g.data(), rstd_g.data(), x.data(), w.data(), N,
                 static_cast<int>(C), kEps);
    expect_overflowed_row_nan(whole ? "CUDA, whole rows" : "CUDA", host_values(out_g), rstd_g, host_values(out_c),
                              rstd_c, C, !std::is_same_v<T, float>);
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(RmsNormEmulation, ARowWhoseMeanSquareOverflowsIsNotANumber) {
  expect_overflowed_rms_row_nan<float, float, 4>();
  expect_overflowed_rms_row_nan<bf16_dev, float, 8>();
  expect_overflowed_rms_row_nan<bf16_dev, bf16_dev, 8>();
}

}  // namespace
}  // namespace zt::test
