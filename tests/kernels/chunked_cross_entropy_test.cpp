// Tests for kernels/cpu/chunked_cross_entropy: the logits of a padded vocabulary fed in chunks of
// columns (uneven last chunk, a chunk of padding only, NaN in every padded column to prove it is
// never read) give the fp64 losses and gradients, and agree with the whole-row kernel; bf16
// chunks; the log-sum-exp written over the running max; targets checked.
#include "kernels/cpu/chunked_cross_entropy.h"

#include <cmath>
#include <limits>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/cross_entropy.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct Ref {
  std::vector<double> losses, dlogits;
};

Ref reference(const std::vector<float>& logits, const std::vector<std::int32_t>& targets, std::int64_t N, int V,
              std::int64_t Vp, double dloss) {
  Ref r{std::vector<double>(N), std::vector<double>(N * Vp, 0.0)};
  for (std::int64_t n = 0; n < N; ++n) {
    const float* x = &logits[n * Vp];
    double mx = -INFINITY, sum = 0.0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(x[v]));
    for (int v = 0; v < V; ++v) sum += std::exp(x[v] - mx);
    for (int v = 0; v < V; ++v) r.dlogits[n * Vp + v] = (std::exp(x[v] - mx) / sum - (v == targets[n])) * dloss;
    r.losses[n] = std::log(sum) + mx - x[targets[n]];
  }
  return r;
}

struct Chunked {
  std::vector<float> losses, dlogits;
};

// Runs the chunked kernels over chunks of `chunk` columns of the [N, Vp] logits, copying each
// chunk out to a [N, chunk] buffer of dtype `dt` as the model's head does.
Chunked run_chunked(const std::vector<float>& logits, std::vector<std::int32_t>& targets, std::int64_t N, int V,
                    std::int64_t Vp, std::int64_t chunk, float dloss, DType dt) {
  std::vector<float> row_max(N), row_sum(N), target_logit(N);
  std::vector<float> buf(N * chunk);
  std::vector<bf16> buf16(N * chunk);
  auto chunk_view = [&](std::int64_t begin, std::int64_t w) {
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t j = 0; j < w; ++j) {
        const float x = logits[n * Vp + begin + j];
        buf[n * w + j] = x;
        buf16[n * w + j] = float_to_bf16(x);
      }
    }
    return dt == DType::kF32 ? TensorView{buf.data(), dt, Device::kCPU, Shape{N, w}}
                             : TensorView{buf16.data(), dt, Device::kCPU, Shape{N, w}};
  };
  for (std::int64_t begin = 0; begin < Vp; begin += chunk) {
    const std::int64_t w = std::min(chunk, Vp - begin);
    cross_entropy_chunk_stats(cpu_ctx(), view_of(row_max), view_of(row_sum), view_of(target_logit),
                              chunk_view(begin, w), view_of(targets), begin, V, begin == 0);
  }
  Chunked out{std::vector<float>(N), std::vector<float>(N * Vp)};
  cross_entropy_chunk_loss(cpu_ctx(), view_of(out.losses), view_of(row_max), view_of(row_max), view_of(row_sum),
                           view_of(target_logit));  // the lse over the running max
  for (std::int64_t begin = 0; begin < Vp; begin += chunk) {
    const std::int64_t w = std::min(chunk, Vp - begin);
    const TensorView c = chunk_view(begin, w);
    cross_entropy_chunk_backward(cpu_ctx(), c, c, view_of(row_max), view_of(targets), begin, dloss, V);  // in place
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t j = 0; j < w; ++j) {
        out.dlogits[n * Vp + begin + j] = dt == DType::kF32 ? buf[n * w + j] : bf16_to_float(buf16[n * w + j]);
      }
    }
  }
  return out;
}

TEST(ChunkedCrossEntropy, ChunksGiveTheFp64LossesAndGradients) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 7, Vp = 320;
  const int V = 250;  // chunks of 64: the last (256..320) holds no real column
  std::vector<float> logits = rng.normal(N * Vp, 0.0f, 4.0f);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t v = V; v < Vp; ++v) logits[n * Vp + v] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<std::int32_t> targets = rng.ints(N, 0, V);
  targets[0] = 0, targets[1] = V - 1;  // the first and the last real column
  const float dloss = 1.0f / static_cast<float>(N);
  const Ref ref = reference(logits, targets, N, V, Vp, dloss);
  for (std::int64_t chunk : {64, 100, 250, 320}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    const Chunked got = run_chunked(logits, targets, N, V, Vp, chunk, dloss, DType::kF32);
    EXPECT_TRUE(close_normwise(got.losses, ref.losses, 1e-6));
    EXPECT_TRUE(close_normwise(got.dlogits, ref.dlogits, 1e-5));
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t v = V; v < Vp; ++v) ASSERT_EQ(got.dlogits[n * Vp + v], 0.0f) << n << " " << v;
    }
  }
  // bf16 chunks: each logit rounded once before the softmax, each gradient once after it.
  std::vector<float> rounded = logits;
  for (float& x : rounded) x = bf16_to_float(float_to_bf16(x));
  const Ref ref16 = reference(rounded, targets, N, V, Vp, dloss);
  const Chunked got16 = run_chunked(logits, targets, N, V, Vp, 64, dloss, DType::kBF16);
  EXPECT_TRUE(close_normwise(got16.losses, ref16.losses, 1e-6));
  EXPECT_TRUE(close_normwise(got16.dlogits, ref16.dlogits, 1e-2));
}

TEST(ChunkedCrossEntropy, AgreesWithTheWholeRowKernel) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 5, Vp = 512;
  const int V = 500;
  std::vector<float> logits = rng.normal(N * Vp, 0.0f, 2.0f);
  std::vector<std::int32_t> targets = rng.ints(N, 0, V);
  std::vector<float> losses(N), dlogits(N * Vp);
  std::vector<float> x = logits;
  softmax_cross_entropy_fused(cpu_ctx(), view_of(losses), view_of(dlogits, {N, Vp}), view_of(x, {N, Vp}),
                              view_of(targets), 0.25f, V);
  const Chunked got = run_chunked(logits, targets, N, V, Vp, 128, 0.25f, DType::kF32);
  EXPECT_TRUE(close_normwise(got.losses, to_double(losses), 1e-6));
  EXPECT_TRUE(close_normwise(got.dlogits, to_double(dlogits), 1e-5));
}

TEST(ChunkedCrossEntropy, RefusesATargetOutsideTheVocabulary) {
  std::vector<float> logits(2 * 8, 0.0f), m(2), s(2), t(2);
  std::vector<std::int32_t> targets{1, 8};
  EXPECT_THROW(cross_entropy_chunk_stats(cpu_ctx(), view_of(m), view_of(s), view_of(t), view_of(logits, {2, 8}),
                                         view_of(targets), 0, 8, true),
               std::exception);
}

}  // namespace
}  // namespace zt::cpu
