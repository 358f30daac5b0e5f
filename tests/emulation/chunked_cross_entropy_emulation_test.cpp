// The CUDA chunked softmax + cross-entropy kernels (kernels/cuda/chunked_cross_entropy_kernels.cuh)
// run on the CPU under the SIMT emulator against the CPU kernels: the row statistics over a
// sequence of chunks (a first, a later one with a larger max, one of padding only), the losses and
// log-sum-exps, and each chunk's gradient in place, F32 and BF16, both vector widths. Tolerances
// of the whole-row test (cross_entropy_emulation_test.cpp): 1e-5 normwise, BF16 outputs per
// element within 2^-7.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/chunked_cross_entropy.h"
#include "kernels/cuda/chunked_cross_entropy_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace cce = cuda::detail::chunked_ce;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

// kSome: each chunk's columns 0-15 and every 97th (never a row's target) -inf, so a thread's first
// groups are all -inf: 0 probability there and finite statistics, on both sides. kLeadingChunks:
// every chunk but the last entirely -inf and the targets in the last, so the running max stays -inf
// over whole chunks (exp(-inf - -inf) would be NaN) before the first finite logit.
enum class Mask { kNone, kSome, kLeadingChunks };

template <typename T, int kVec>
void run_shape(Rng& rng, std::int64_t N, int V, int cols, int chunks, Mask mask = Mask::kNone) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " N=" << N << " V=" << V << " cols=" << cols
                                    << " kVec=" << kVec << " mask " << static_cast<int>(mask));
  const DType dt = dtype_of<T>();
  const Shape shape{N, cols};
  const float dloss = 1.0f / static_cast<float>(N);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>((n * 7919 + 3) % V);
  targets[N - 1] = V - 1;  // in the last chunk's last live group, partial where its live columns are
  const std::int64_t last_begin = static_cast<std::int64_t>(chunks - 1) * cols;
  if (mask == Mask::kLeadingChunks) {
    for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>(last_begin + n % (V - last_begin));
  }
  std::vector<float> c_max(N), c_sum(N), c_tl(N), g_max(N, NAN), g_sum(N, NAN), g_tl(N, NAN);
  std::vector<std::vector<T>> chunk_logits;
  for (int c = 0; c < chunks; ++c) {
    const std::int64_t begin = static_cast<std::int64_t>(c) * cols;
    // Later chunks larger: the running max moves and the carried sum is rescaled.
    std::vector<float> values = rng.normal(N * cols, 0.5f * c, 3.0f);
    for (std::int64_t n = 0; mask != Mask::kNone && n < N; ++n) {
      for (int v = 0; v < cols; ++v) {
        const bool masked = mask == Mask::kSome ? (v < 16 || v % 97 == 5) : begin < last_begin;
        if (masked && begin + v != targets[n]) values[n * cols + v] = -INFINITY;
      }
    }
    chunk_logits.push_back(device_values<T>(values));
    std::vector<T>& x = chunk_logits.back();
    cpu::cross_entropy_chunk_stats(reference_ctx(), view_of(c_max), view_of(c_sum), view_of(c_tl),
                                   TensorView{x.data(), dt, Device::kCPU, shape}, view_of(targets), begin, V, c == 0);
    const int live = std::clamp(V - static_cast<int>(begin), 0, cols);
    simt::launch(dim3(static_cast<unsigned>(N)), cce::kThreads, 0, cce::chunk_stats_kernel<T, kVec>, g_max.data(),
                 g_sum.data(), g_tl.data(), x.data(), targets.data(), cols, live, begin, V, c == 0);
  }
  EXPECT_TRUE(close_to_cpu(g_max, c_max, false)) << "row max";
  EXPECT_TRUE(close_to_cpu(g_sum, c_sum, false)) << "row sum";
  EXPECT_TRUE(close_to_cpu(g_tl, c_tl, false)) << "target logit";

  std::vector<float> c_loss(N), g_loss(N, NAN);
  cpu::cross_entropy_chunk_loss(reference_ctx(), view_of(c_loss), view_of(c_max), view_of(c_max), view_of(c_sum),
                                view_of(c_tl));
  simt::launch(dim3(1), 64, 0, cce::chunk_loss_kernel, g_loss.data(), g_max.data(), g_max.data(), g_sum.data(),
               g_tl.data(), N);
  EXPECT_TRUE(close_to_cpu(g_loss, c_loss, false)) << "losses";
  EXPECT_TRUE(close_to_cpu(g_max, c_max, false)) << "lse";
  for (std::int64_t n = 0; n < N; ++n) {
    ASSERT_TRUE(std::isfinite(c_sum[n]) && std::isfinite(c_loss[n]) && std::isfinite(c_max[n])) << "CPU row " << n;
    ASSERT_TRUE(std::isfinite(g_sum[n]) && std::isfinite(g_loss[n]) && std::isfinite(g_max[n])) << "GPU row " << n;
  }

  for (int c = 0; c < chunks; ++c) {
    const std::int64_t begin = static_cast<std::int64_t>(c) * cols;
    std::vector<T> cpu_grad = chunk_logits[c], gpu_grad = chunk_logits[c];  // in place over the logits
    cpu::cross_entropy_chunk_backward(reference_ctx(), TensorView{cpu_grad.data(), dt, Device::kCPU, shape},
                                      TensorView{cpu_grad.data(), dt, Device::kCPU, shape}, view_of(c_max),
                                      view_of(targets), begin, dloss, V);
    const int live = std::clamp(V - static_cast<int>(begin), 0, cols);
    simt::launch(dim3(static_cast<unsigned>(N)), cce::kThreads, 0, cce::chunk_backward_kernel<T, kVec>, gpu_grad.data(),
                 gpu_grad.data(), g_max.data(), targets.data(), cols, live, begin, dloss);
    EXPECT_TRUE(close_to_cpu(host_values(gpu_grad), host_values(cpu_grad), kBf16)) << "chunk " << c << " dlogits";
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(ChunkedCrossEntropyEmulation, StatisticsLossAndGradientsMatchCpu) {
  ZT_SEEDED_RNG(rng);
  run_shape<float, 1>(rng, 3, 100, 40, 3);  // the last chunk holds 20 real columns
  run_shape<bf16_dev, 1>(rng, 3, 100, 40, 3);
  run_shape<float, 4>(rng, 2, 1100, 640, 3);  // a chunk of padding only, and above the block's threads
  run_shape<bf16_dev, 8>(rng, 2, 1100, 640, 3);
}

TEST(ChunkedCrossEntropyEmulation, MinusInfinityLogitsGetZeroProbabilityAndFiniteStatistics) {
  ZT_SEEDED_RNG(rng);
  run_shape<float, 1>(rng, 3, 100, 40, 3, Mask::kSome);  // the last chunk's 20 live columns: 16 of them -inf
  run_shape<float, 4>(rng, 2, 1100, 640, 3, Mask::kSome);
  run_shape<bf16_dev, 8>(rng, 2, 1100, 640, 3, Mask::kSome);
  run_shape<float, 1>(rng, 3, 100, 40, 3, Mask::kLeadingChunks);  // two whole chunks of -inf, then 20 live columns
  run_shape<bf16_dev, 8>(rng, 2, 1100, 640, 2, Mask::kLeadingChunks);
}

// Logits near 1000 (a model whose logits all drift up: the softmax does not care, the loss must not
// either). The running sum is a sum of 2^(x log2 e - shift) with each max's shift rounded once, so
// the carry between chunks and the loss read it against that shift; read against the max itself
// (e^max), each row's loss was off by up to ln 2 * half an ulp of max * log2 e, 3e-5 here (about 60
// ulps of the loss). Each loss within 2e-6 of the CPU's (a few ulps), over three chunks whose maxes rise.
TEST(ChunkedCrossEntropyEmulation, LargeLogitsKeepEachLossToAFewUlps) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 6;
  const int V = 1500, cols = 512, chunks = 3;
  std::vector<std::int32_t> targets(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>((n * 613 + 5) % V);
  std::vector<float> c_max(N), c_sum(N), c_tl(N), g_max(N), g_sum(N), g_tl(N);
  for (int c = 0; c < chunks; ++c) {
    const std::int64_t begin = static_cast<std::int64_t>(c) * cols;
    std::vector<float> x = rng.normal(N * cols, 1000.0f + 0.75f * static_cast<float>(c), 2.0f);
    cpu::cross_entropy_chunk_stats(reference_ctx(), view_of(c_max), view_of(c_sum), view_of(c_tl),
                                   TensorView{x.data(), DType::kF32, Device::kCPU, Shape{N, cols}}, view_of(targets),
                                   begin, V, c == 0);
    const int live = std::clamp(V - static_cast<int>(begin), 0, cols);
    simt::launch(dim3(static_cast<unsigned>(N)), cce::kThreads, 0, cce::chunk_stats_kernel<float, 4>, g_max.data(),
                 g_sum.data(), g_tl.data(), x.data(), targets.data(), cols, live, begin, V, c == 0);
  }
  std::vector<float> c_loss(N), g_loss(N);
  cpu::cross_entropy_chunk_loss(reference_ctx(), view_of(c_loss), view_of(c_max), view_of(c_max), view_of(c_sum),
                                view_of(c_tl));
  simt::launch(dim3(1), 64, 0, cce::chunk_loss_kernel, g_loss.data(), g_max.data(), g_max.data(), g_sum.data(),
               g_tl.data(), N);
  for (std::int64_t n = 0; n < N; ++n) {
    EXPECT_NEAR(g_loss[n], c_loss[n], 2e-6) << "row " << n;
    EXPECT_NEAR(g_max[n], c_max[n], 2 * 6.2e-5) << "row " << n << " lse (fp32 ulp at 1000: 6.1e-5)";
  }
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

// A target outside the vocabulary (the host does not check targets on the GPU) gives its row a NaN
// loss, as the whole-row kernel does, so the trainer's non-finite check stops the run.
TEST(ChunkedCrossEntropyEmulation, ATargetOutsideTheVocabularyGivesANanLoss) {
  const int V = 50, cols = 64;
  std::vector<float> logits(2 * cols, 0.5f), mx(2), sum(2), tl(2), loss(2);
  std::vector<std::int32_t> targets{3, V};  // row 1's target is a padded column
  simt::launch(dim3(2), cce::kThreads, 0, cce::chunk_stats_kernel<float, 1>, mx.data(), sum.data(), tl.data(),
               logits.data(), targets.data(), cols, V, std::int64_t{0}, V, true);
  simt::launch(dim3(1), 64, 0, cce::chunk_loss_kernel, loss.data(), mx.data(), mx.data(), sum.data(), tl.data(),
               std::int64_t{2});
  EXPECT_TRUE(std::isfinite(loss[0])) << loss[0];
  EXPECT_TRUE(std::isnan(loss[1])) << loss[1];
  // The backward still writes the padding [V, cols) as 0, the out-of-vocabulary target's included.
  std::vector<float> grad(2 * cols, NAN);
  simt::launch(dim3(2), cce::kThreads, 0, cce::chunk_backward_kernel<float, 1>, grad.data(), logits.data(), mx.data(),
               targets.data(), cols, V, std::int64_t{0}, 0.5f);
  for (int n = 0; n < 2; ++n) {
    for (int v = V; v < cols; ++v) {
      EXPECT_EQ(grad[static_cast<std::size_t>(n * cols + v)], 0.0f) << "row " << n << " padded column " << v;
    }
  }
}

}  // namespace
}  // namespace zt::test
