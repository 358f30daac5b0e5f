// Fused softmax + cross-entropy on the CPU, one row per task. Only the first vocab_size columns
// enter the softmax; padded columns read as probability 0 and get gradient 0. The exp sum is kept
// in fp64 (lane-wise, fixed order) so the loss of a 50k vocabulary stays accurate and reproducible.
#include "kernels/cpu/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

struct CeDims {
  std::int64_t rows;
  std::int64_t padded_vocab;
};

CeDims check_dims(const TensorView& probs, const TensorView& targets, int vocab_size) {
  ZT_CHECK(targets.dtype == DType::kI32, "targets must be I32");
  ZT_CHECK(probs.shape.ndim() >= 1);
  CeDims d;
  d.padded_vocab = probs.shape[probs.shape.ndim() - 1];
  ZT_CHECK(vocab_size > 0 && vocab_size <= d.padded_vocab, "vocab_size {} outside (0, {}]", vocab_size, d.padded_vocab);
  d.rows = probs.numel() / d.padded_vocab;
  ZT_CHECK(targets.numel() == d.rows, "targets has {} elements, logits {} rows", targets.numel(), d.rows);
  // Checked before any parallel loop: an exception must not leave an OpenMP region.
  const std::int32_t* tgt = targets.as<std::int32_t>();
  for (std::int64_t n = 0; n < d.rows; ++n) {
    ZT_CHECK(tgt[n] >= 0 && tgt[n] < vocab_size, "target {} at row {} outside [0, {})", tgt[n], n, vocab_size);
  }
  return d;
}

}  // namespace

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  const CeDims d = check_dims(probs, targets, vocab_size);
  ZT_CHECK(logits.numel() == probs.numel(), "logits must be shaped as probs");
  ZT_CHECK(losses.dtype == DType::kF32 && losses.numel() == d.rows, "losses must be F32 [{}]", d.rows);
  if (activation_dtype("softmax_cross_entropy_forward", {probs, logits}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(ctx,
                       {{detail::as_rows(probs, d.padded_vocab), Access::kWrite},
                        {detail::as_rows(logits, d.padded_vocab), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         softmax_cross_entropy_forward(ctx, losses.slice(first, n), v[0], v[1], targets.slice(first, n),
                                                       vocab_size);
                       });
    return;
  }
  const std::int64_t Vp = d.padded_vocab, V = vocab_size;
  const float* x = logits.as<float>();
  float* p = probs.as<float>();
  float* loss = losses.as<float>();
  const std::int32_t* tgt = targets.as<std::int32_t>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* xr = x + n * Vp;
    float* pr = p + n * Vp;  // may be xr itself: every xr[v] is read before pr[v] is written
    const float target_logit = xr[tgt[n]];
    const float mx = vec::max(xr, V);
#pragma GCC ivdep
    for (std::int64_t v = 0; v < V; ++v) pr[v] = vec::exp_approx(xr[v] - mx);
    const double sum = vec::sum_f64(pr, V);
    // loss = log(sum exp(x - max)) - (x_target - max), the max cancelling exactly in fp64.
    loss[n] = static_cast<float>(std::log(sum) - (static_cast<double>(target_logit) - static_cast<double>(mx)));
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (std::int64_t v = 0; v < V; ++v) pr[v] *= inv_sum;
    if (Vp > V) std::memset(pr + V, 0, static_cast<std::size_t>(Vp - V) * sizeof(float));
  }
}

void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size) {
  const CeDims d = check_dims(probs, targets, vocab_size);
  ZT_CHECK(dlogits.numel() == probs.numel(), "dlogits must be shaped as probs");
  if (activation_dtype("softmax_cross_entropy_backward", {dlogits, probs}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(ctx,
                       {{detail::as_rows(dlogits, d.padded_vocab), Access::kWrite},
                        {detail::as_rows(probs, d.padded_vocab), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         softmax_cross_entropy_backward(ctx, v[0], v[1], targets.slice(first, n), dloss, vocab_size);
                       });
    return;
  }
  const std::int64_t Vp = d.padded_vocab, V = vocab_size;
  float* dx = dlogits.as<float>();
  const float* p = probs.as<float>();
  const std::int32_t* tgt = targets.as<std::int32_t>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* pr = p + n * Vp;
    float* dr = dx + n * Vp;  // may alias pr: the target's probability is read before the loop
    const float target_prob = pr[tgt[n]];
#pragma GCC ivdep
    for (std::int64_t v = 0; v < V; ++v) dr[v] = pr[v] * dloss;
    dr[tgt[n]] = (target_prob - 1.0f) * dloss;
    if (Vp > V) std::memset(dr + V, 0, static_cast<std::size_t>(Vp - V) * sizeof(float));
  }
}

void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size) {
  softmax_cross_entropy_forward(ctx, losses, dlogits, logits, targets, vocab_size);
  softmax_cross_entropy_backward(ctx, dlogits, dlogits, targets, dloss, vocab_size);
}

}  // namespace zt::cpu
