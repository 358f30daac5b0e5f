// The CUDA LayerNorm kernels (kernels/cuda/layernorm_kernels.cuh) run on the CPU under the SIMT
// emulator ([Note: SIMT emulation] in simt_runtime.h), as layernorm.cu launches them, against the
// CPU kernels: plain and residual-fused forward, the chunked backward and its parameter-gradient
// pass, both vector widths (kVec 4 for fp32 and 8 for bf16 activations, 16 bytes, where C allows), F32 and BF16
// activations, with F32 parameters and (BF16 activations only) BF16 working parameters, read by the CPU kernels too.
// Tolerances of tests/gpu/layernorm_embedding_test.cpp: 1e-5 normwise for fp32 results (sums of C terms in another
// fixed order); BF16 results also within 2^-7 of the CPU's per element (one rounding each, which a last-bit difference
// before it may flip), and the fused residual bitwise (one addition rounded once on both sides).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/layernorm_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace ln = cuda::detail::ln;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

template <typename T, typename P, int kVec>
void run_shape(Rng& rng, std::int64_t N, std::int64_t C) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " activations, "
                                    << (std::is_same_v<P, float> ? "F32" : "BF16") << " parameters, N=" << N
                                    << " C=" << C << " kVec=" << kVec);
  const DType dt = dtype_of<T>(), pt = dtype_of<P>();
  const Shape nc{N, C};
  // Operands rounded to the activation dtype first, so both sides read the same values.
  const std::vector<float> a = host_values(device_values<T>(rng.normal(N * C, 2.0f, 3.0f)));
  const std::vector<float> b = host_values(device_values<T>(rng.normal(N * C)));
  std::vector<P> w = device_values<P>(rng.normal(C)), bias = device_values<P>(rng.normal(C));
  const TensorView w_view{w.data(), pt, Device::kCPU, Shape{C}}, bias_view{bias.data(), pt, Device::kCPU, Shape{C}};
  const std::vector<float> dout = host_values(device_values<T>(rng.normal(N * C)));
  const std::vector<float> dinp0 = host_values(device_values<T>(rng.normal(N * C)));
  const std::vector<float> dw0 = rng.normal(C), db0 = rng.normal(C);

  // CPU: x = a + b (rounded to the dtype), out = LN(x), then the backward accumulating into
  // dinp0, dw0, db0.
  std::vector<T> a_t = device_values<T>(a), b_t = device_values<T>(b), x_t(a_t.size()), out_t(a_t.size());
  std::vector<float> mean(N), rstd(N);
  cpu::residual_forward(reference_ctx(), TensorView{x_t.data(), dt, Device::kCPU, nc},
                        TensorView{a_t.data(), dt, Device::kCPU, nc}, TensorView{b_t.data(), dt, Device::kCPU, nc});
  cpu::layernorm_forward(reference_ctx(), TensorView{out_t.data(), dt, Device::kCPU, nc}, view_of(mean), view_of(rstd),
                         TensorView{x_t.data(), dt, Device::kCPU, nc}, w_view, bias_view);
  std::vector<T> dout_t = device_values<T>(dout), dinp_t = device_values<T>(dinp0);
  std::vector<float> dw = dw0, db = db0;
  cpu::layernorm_backward(reference_ctx(), TensorView{dinp_t.data(), dt, Device::kCPU, nc}, view_of(dw), view_of(db),
                          TensorView{dout_t.data(), dt, Device::kCPU, nc}, TensorView{x_t.data(), dt, Device::kCPU, nc},
                          w_view, view_of(mean), view_of(rstd));

  // Emulated: the fused forward (residual = a + b, out = LN(residual)), then the plain one on x.
  const std::vector<T> nan = device_values<T>(std::vector<float>(static_cast<std::size_t>(N * C), NAN));
  std::vector<T> g_res = nan, g_out = nan, g_out2 = nan;
  std::vector<float> g_mean(N, NAN), g_rstd(N, NAN);
  const dim3 fwd_grid(static_cast<unsigned>((N + ln::kForwardWarps - 1) / ln::kForwardWarps));
  const int fwd_threads = ln::kForwardWarps * cuda::detail::kWarpSize;
  simt::launch(fwd_grid, fwd_threads, 0, ln::layernorm_forward_kernel<T, P, kVec>, g_out.data(), g_mean.data(),
               g_rstd.data(), g_res.data(), a_t.data(), b_t.data(), w.data(), bias.data(), N, static_cast<int>(C));
  EXPECT_TRUE(bitwise_equal(host_values(g_res), host_values(x_t))) << "residual";
  EXPECT_TRUE(close_to_cpu(host_values(g_out), host_values(out_t), kBf16)) << "fused out";
  EXPECT_TRUE(close_to_cpu(g_mean, mean, false)) << "mean";
  EXPECT_TRUE(close_to_cpu(g_rstd, rstd, false)) << "rstd";
  // In place, as GPT-2's block calls it (the residual stream is a, updated to a + b): the same bits,
  // both kernels (each thread reads its groups of a before it writes them).
  for (const bool whole : {false, true}) {
    if (whole && (kVec == 1 || C / kVec > cuda::detail::kRowBatch * 32)) continue;
    std::vector<T> stream = a_t, i_out = nan;
    std::vector<float> i_mean(N, NAN), i_rstd(N, NAN);
    auto kernel = whole ? ln::layernorm_forward_kernel<T, P, kVec, true> : ln::layernorm_forward_kernel<T, P, kVec>;
    simt::launch(fwd_grid, fwd_threads, 0, kernel, i_out.data(), i_mean.data(), i_rstd.data(), stream.data(),
                 stream.data(), b_t.data(), w.data(), bias.data(), N, static_cast<int>(C));
    EXPECT_TRUE(bitwise_equal(host_values(stream), host_values(g_res)) &&
                bitwise_equal(host_values(i_out), host_values(g_out)) && bitwise_equal(i_mean, g_mean) &&
                bitwise_equal(i_rstd, g_rstd))
        << "in place (residual = a)" << (whole ? ", whole rows" : "");
  }
  simt::launch(fwd_grid, fwd_threads, 0, ln::layernorm_forward_kernel<T, P, kVec>, g_out2.data(), g_mean.data(),
               g_rstd.data(), static_cast<T*>(nullptr), x_t.data(), static_cast<const T*>(nullptr), w.data(),
               bias.data(), N, static_cast<int>(C));
  EXPECT_TRUE(close_to_cpu(host_values(g_out2), host_values(out_t), kBf16)) << "out";
  // The launcher's whole-row forwards where a row fits one batch of loads: the same bits.
  if constexpr (kVec > 1) {
    if (C / kVec <= cuda::detail::kRowBatch * 32) {
      std::vector<T> w_res = nan, w_out = nan, w_out2 = nan;
      std::vector<float> w_mean(N, NAN), w_rstd(N, NAN), w_mean2(N, NAN), w_rstd2(N, NAN);
      simt::launch(fwd_grid, fwd_threads, 0, ln::layernorm_forward_kernel<T, P, kVec, true>, w_out.data(),
                   w_mean.data(), w_rstd.data(), w_res.data(), a_t.data(), b_t.data(), w.data(), bias.data(), N,
                   static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(host_values(w_res), host_values(g_res))) << "residual, whole rows";
      EXPECT_TRUE(bitwise_equal(host_values(w_out), host_values(g_out))) << "fused out, whole rows";
      simt::launch(fwd_grid, fwd_threads, 0, ln::layernorm_forward_kernel<T, P, kVec, true>, w_out2.data(),
                   w_mean2.data(), w_rstd2.data(), static_cast<T*>(nullptr), x_t.data(), static_cast<const T*>(nullptr),
                   w.data(), bias.data(), N, static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(host_values(w_out2), host_values(g_out2))) << "out, whole rows";
      EXPECT_TRUE(bitwise_equal(w_mean, g_mean) && bitwise_equal(w_rstd, g_rstd)) << "statistics, whole rows";
      EXPECT_TRUE(bitwise_equal(w_mean2, g_mean) && bitwise_equal(w_rstd2, g_rstd)) << "statistics, whole rows";
    }
  }

  std::vector<T> g_dinp = device_values<T>(dinp0);
  std::vector<float> g_dw = dw0, g_db = db0;
  const std::int64_t chunks = (N + ln::kRowsPerChunk - 1) / ln::kRowsPerChunk;
  std::vector<float> partials(static_cast<std::size_t>(chunks * 2 * C), NAN);
  simt::launch(dim3(static_cast<unsigned>(chunks)), ln::kBackwardThreads, 0, ln::layernorm_backward_chunk<T, P, kVec>,
               g_dinp.data(), partials.data(), dout_t.data(), x_t.data(), w.data(), g_mean.data(), g_rstd.data(), N,
               static_cast<int>(C));
  // The launcher's whole-row variant (a lane's groups loaded once a row) where the row fits in one
  // batch: the same bits as the two-pass reads.
  if constexpr (kVec > 1) {
    if (C / kVec <= cuda::detail::kRowBatch * 32) {
      std::vector<T> c_dinp = device_values<T>(dinp0);
      std::vector<float> c_partials(partials.size(), NAN);
      simt::launch(dim3(static_cast<unsigned>(chunks)), ln::kBackwardThreads, 0,
                   ln::layernorm_backward_chunk<T, P, kVec, true>, c_dinp.data(), c_partials.data(), dout_t.data(),
                   x_t.data(), w.data(), g_mean.data(), g_rstd.data(), N, static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(host_values(c_dinp), host_values(g_dinp))) << "dinp, whole rows in registers";
      EXPECT_TRUE(bitwise_equal(c_partials, partials)) << "partials, whole rows in registers";
    }
  }
  // The launcher's default for 16-byte rows of up to 512 groups, a block a row ([Note: a block a
  // row]): the column pass's partials bit for bit, dinp within the CPU's bounds (another order of
  // the rows' sums).
  if constexpr (kVec > 1) {
    const std::int64_t groups = C / kVec;
    if (groups <= cuda::detail::kBlockRowMaxGroups) {
      std::vector<T> b_dinp = device_values<T>(dinp0);
      std::vector<float> b_partials(partials.size(), NAN);
      const auto kernel =
          cuda::detail::block_rows_kernel<ln::LayerNormRows<kVec>, T, P, kVec, ln::kRowsPerChunk>(groups);
      simt::launch(dim3(static_cast<unsigned>(chunks)), cuda::detail::block_row_threads(groups), 0, kernel,
                   b_dinp.data(), b_partials.data(), dout_t.data(), x_t.data(), w.data(), g_mean.data(), g_rstd.data(),
                   N, static_cast<int>(C));
      EXPECT_TRUE(bitwise_equal(b_partials, partials)) << "partials, a block a row";
      EXPECT_TRUE(close_to_cpu(host_values(b_dinp), host_values(dinp_t), kBf16)) << "dinp, a block a row";
    }
  }
  const dim3 param_grid(cuda::detail::partial_blocks(C));
  constexpr int kParamThreads = cuda::detail::kPartialThreads;
  simt::launch(param_grid, kParamThreads, 0, ln::layernorm_backward_params<float>, g_dw.data(), g_db.data(),
               static_cast<const float*>(partials.data()), chunks, static_cast<int>(C));
  EXPECT_TRUE(close_to_cpu(host_values(g_dinp), host_values(dinp_t), kBf16)) << "dinp";
  EXPECT_TRUE(close_to_cpu(g_dw, dw, false)) << "dweight";
  EXPECT_TRUE(close_to_cpu(g_db, db, false)) << "dbias";
  // Gradients added in place into bf16 storage (ParamStore::in_place_grads): from the same
  // partials, each element is round(widen(old) + the sum the fp32 kernel adds to zero).
  std::vector<float> sum_dw(static_cast<std::size_t>(C), 0.0f), sum_db = sum_dw;
  simt::launch(param_grid, kParamThreads, 0, ln::layernorm_backward_params<float>, sum_dw.data(), sum_db.data(),
               static_cast<const float*>(partials.data()), chunks, static_cast<int>(C));
  std::vector<bf16_dev> b_dw = to_device_bf16(dw0), b_db = to_device_bf16(db0);
  const std::vector<float> old_dw = widen(b_dw), old_db = widen(b_db);
  simt::launch(param_grid, kParamThreads, 0, ln::layernorm_backward_params<bf16_dev>, b_dw.data(), b_db.data(),
               static_cast<const float*>(partials.data()), chunks, static_cast<int>(C));
  std::vector<float> want_dw(old_dw.size()), want_db(old_db.size());
  for (std::size_t i = 0; i < want_dw.size(); ++i) {
    want_dw[i] = round_to_bf16(old_dw[i] + sum_dw[i]);
    want_db[i] = round_to_bf16(old_db[i] + sum_db[i]);
  }
  EXPECT_TRUE(bitwise_equal(widen(b_dw), want_dw)) << "bf16 dweight";
  EXPECT_TRUE(bitwise_equal(widen(b_db), want_db)) << "bf16 dbias";
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

using Shapes = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Under ThreadSanitizer, which looks for missing barriers, one shape of each kernel path (a block
// at a time: more rows or another width of the same path add no interleaving to see); the shapes
// it drops took the test past its 300 s timeout in a full two-job ctest run (157 s alone).
Shapes for_tsan(Shapes all, std::initializer_list<std::size_t> kept) {
#ifdef ZT_EMULATION_UNDER_TSAN
  Shapes some;
  for (std::size_t i : kept) some.push_back(all[i]);
  return some;
#else
  (void)kept;
  return all;
#endif
}

// C not a multiple of 32 or 4, N not a multiple of the forward's 8 rows or the backward's 32-row
// chunks; C = 768 spans several groups per lane; 600 rows make more chunks than the parameter
// pass has warps.
TEST(LayerNormEmulation, ForwardFusedAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : for_tsan({{1, 1}, {5, 37}, {7, 13}, {70, 100}}, {1, 3})) {
    run_shape<float, float, 1>(rng, N, C);
    run_shape<bf16_dev, float, 1>(rng, N, C);
    run_shape<bf16_dev, bf16_dev, 1>(rng, N, C);
  }
  // The launcher's 16-byte groups: 4 columns of fp32 activations, 8 of bf16 (fp32 parameters then
  // read as two float4).
  // C = 1024 is the widest row the register-cached backward takes (every lane's last group used);
  // 1100 too wide for it (the two-pass reads).
  for (auto [N, C] : for_tsan({{65, 12}, {33, 768}, {70, 100}, {9, 1024}, {9, 1100}}, {1, 4})) {
    run_shape<float, float, 4>(rng, N, C);
  }
  for (auto [N, C] : for_tsan({{65, 24}, {33, 768}, {70, 104}, {9, 1024}, {9, 1104}}, {1, 4})) {
    run_shape<bf16_dev, float, 8>(rng, N, C);
    run_shape<bf16_dev, bf16_dev, 8>(rng, N, C);
  }
  // A block a row at two groups a thread (260 and 300 groups), the last chunk's batches partial.
  for (auto [N, C] : for_tsan({{37, 2080}, {35, 1200}}, {0})) {
    run_shape<bf16_dev, float, 8>(rng, N, C);
    run_shape<float, float, 4>(rng, N, C);
  }
  // More chunks (19) than the parameter pass has warps (16), and a partial second block of columns.
  // Not under ThreadSanitizer (600 rows of threads; rmsnorm_emulation_test races the same pass).
#ifndef ZT_EMULATION_UNDER_TSAN
  run_shape<float, float, 1>(rng, 600, 40);
  run_shape<bf16_dev, bf16_dev, 8>(rng, 600, 40);
#endif
}

// A row whose variance overflows float (values of +-1e20, a diverging run's residual stream)
// normalizes to NaN on the CPU and in both CUDA forwards (kernels/contracts/norm_row_scale.h), as
// PyTorch's layer_norm gives: never to its bias alone (a scale of 0, uniform logits, a finite loss
// no check sees). The row beside it stays as it was.
template <typename T, typename P, int kVec>
void expect_overflowed_ln_row_nan() {
  SCOPED_TRACE(::testing::Message() << (std::is_same_v<T, float> ? "F32" : "BF16") << " activations, kVec=" << kVec);
  constexpr std::int64_t N = 2, C = 64;
  std::vector<T> x = device_values<T>(overflowing_then_plain_rows(C)), out_c(x.size());
  std::vector<P> w = device_values<P>(std::vector<float>(C, 1.0f)),
                 bias = device_values<P>(std::vector<float>(C, 0.5f));
  std::vector<float> mean_c(N), rstd_c(N);
  const DType dt = dtype_of<T>(), pt = dtype_of<P>();
  cpu::layernorm_forward(reference_ctx(), TensorView{out_c.data(), dt, Device::kCPU, Shape{N, C}}, view_of(mean_c),
                         view_of(rstd_c), TensorView{x.data(), dt, Device::kCPU, Shape{N, C}},
                         TensorView{w.data(), pt, Device::kCPU, Shape{C}},
                         TensorView{bias.data(), pt, Device::kCPU, Shape{C}});
  const dim3 grid(static_cast<unsigned>((N + ln::kForwardWarps - 1) / ln::kForwardWarps));
  for (const bool whole : {false, true}) {
    std::vector<T> out_g = device_values<T>(std::vector<float>(x.size(), 0.0f));
    std::vector<float> mean_g(N, 0.0f), rstd_g(N, 0.0f);
    auto kernel = whole ? ln::layernorm_forward_kernel<T, P, kVec, true> : ln::layernorm_forward_kernel<T, P, kVec>;
    simt::launch(grid, ln::kForwardWarps * cuda::detail::kWarpSize, 0, kernel, out_g.data(), mean_g.data(),
                 rstd_g.data(), static_cast<T*>(nullptr), x.data(), static_cast<const T*>(nullptr), w.data(),
                 bias.data(), N, static_cast<int>(C));
    expect_overflowed_row_nan(whole ? "CUDA, whole rows" : "CUDA", host_values(out_g), rstd_g, host_values(out_c),
                              rstd_c, C, !std::is_same_v<T, float>);
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(LayerNormEmulation, ARowWhoseVarianceOverflowsIsNotANumber) {
  expect_overflowed_ln_row_nan<float, float, 4>();
  expect_overflowed_ln_row_nan<bf16_dev, float, 8>();
  expect_overflowed_ln_row_nan<bf16_dev, bf16_dev, 8>();
}

}  // namespace
}  // namespace zt::test
