// Chunked softmax + cross-entropy on the CPU, one row per task; bf16 chunks are staged through fp32
// rows (bf16_staging.h). Each chunk's sum of exponentials is formed in fp64 in a fixed lane order,
// as the whole-row kernel's (cross_entropy.cpp), so results repeat bitwise.
#include "kernels/cpu/chunked_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

struct ChunkDims {
  std::int64_t rows;
  std::int64_t cols;  // Vc
  std::int64_t live;  // the chunk's real columns: [0, live)
};

ChunkDims check_chunk(const TensorView& logits, const TensorView& targets, std::int64_t begin, int vocab_size) {
  ZT_CHECK(targets.dtype == DType::kI32, "targets must be I32");
  ZT_CHECK(logits.shape.ndim() >= 1 && begin >= 0 && vocab_size > 0);
  ChunkDims d;
  d.cols = logits.shape[logits.shape.ndim() - 1];
  d.rows = d.cols == 0 ? 0 : logits.numel() / d.cols;
  d.live = std::clamp<std::int64_t>(vocab_size - begin, 0, d.cols);
  ZT_CHECK(targets.numel() == d.rows, "targets has {} elements, logits {} rows", targets.numel(), d.rows);
  const std::int32_t* tgt = targets.as<std::int32_t>();
  for (std::int64_t n = 0; n < d.rows; ++n) {  // before any parallel loop: no exception inside one
    ZT_CHECK(tgt[n] >= 0 && tgt[n] < vocab_size, "target {} at row {} outside [0, {})", tgt[n], n, vocab_size);
  }
  return d;
}

void check_stat(const TensorView& v, std::int64_t rows, const char* name) {
  ZT_CHECK(v.dtype == DType::kF32 && v.numel() == rows, "{} must be F32 [{}]", name, rows);
}

}  // namespace

void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first) {
  const ChunkDims d = check_chunk(logits, targets, begin, vocab_size);
  check_stat(row_max, d.rows, "row_max");
  check_stat(row_sum, d.rows, "row_sum");
  check_stat(target_logit, d.rows, "target_logit");
  if (activation_dtype("cross_entropy_chunk_stats", {logits}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(ctx, {{detail::as_rows(logits, d.cols), Access::kRead}},
                       [&](std::int64_t r0, std::int64_t n, std::span<const TensorView> v) {
                         cross_entropy_chunk_stats(ctx, row_max.slice(r0, n), row_sum.slice(r0, n),
                                                   target_logit.slice(r0, n), v[0], targets.slice(r0, n), begin,
                                                   vocab_size, first);
                       });
    return;
  }
  const float* x = logits.as<float>();
  float* mx = row_max.as<float>();
  float* sum = row_sum.as<float>();
  float* tl = target_logit.as<float>();
  const std::int32_t* tgt = targets.as<std::int32_t>();
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> e(static_cast<std::size_t>(d.live));
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < d.rows; ++n) {
      const float* xr = x + n * d.cols;
      const std::int64_t t = tgt[n] - begin;
      if (first) tl[n] = 0.0f;
      if (t >= 0 && t < d.live) tl[n] = xr[t];
      if (d.live == 0) {
        if (first) mx[n] = -INFINITY, sum[n] = 0.0f;
        continue;
      }
      const float chunk_max = vec::max(xr, d.live);
      const float new_max = first ? chunk_max : std::max(mx[n], chunk_max);
      if (new_max == -INFINITY) {  // every logit so far -inf: nothing to add (exp(-inf - -inf) is NaN)
        if (first) mx[n] = -INFINITY, sum[n] = 0.0f;
        continue;
      }
#pragma GCC ivdep
      for (std::int64_t v = 0; v < d.live; ++v) e[static_cast<std::size_t>(v)] = vec::exp_approx(xr[v] - new_max);
      const double partial = vec::sum_f64(e.data(), d.live);
      const double carried = first ? 0.0 : static_cast<double>(sum[n]) * std::exp(static_cast<double>(mx[n]) - new_max);
      sum[n] = static_cast<float>(carried + partial);
      mx[n] = new_max;
    }
  }
}

void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit) {
  const std::int64_t rows = row_max.numel();
  for (const auto& [v, name] : {std::pair{losses, "losses"}, std::pair{lse, "lse"}, std::pair{row_max, "row_max"},
                                std::pair{row_sum, "row_sum"}, std::pair{target_logit, "target_logit"}}) {
    check_stat(v, rows, name);
  }
  float* loss = losses.as<float>();
  float* out = lse.as<float>();  // may be row_max: each row reads its max before writing
  const float* mx = row_max.as<float>();
  const float* sum = row_sum.as<float>();
  const float* tl = target_logit.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const double log_sum = std::log(static_cast<double>(sum[n])), m = mx[n];
    loss[n] = static_cast<float>(log_sum - (static_cast<double>(tl[n]) - m));
    out[n] = static_cast<float>(m + log_sum);
  }
}

void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size) {
  const ChunkDims d = check_chunk(logits, targets, begin, vocab_size);
  check_stat(lse, d.rows, "lse");
  ZT_CHECK(dlogits.numel() == logits.numel(), "dlogits must be shaped as logits");
  if (activation_dtype("cross_entropy_chunk_backward", {dlogits, logits}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx, {{detail::as_rows(dlogits, d.cols), Access::kWrite}, {detail::as_rows(logits, d.cols), Access::kRead}},
        [&](std::int64_t r0, std::int64_t n, std::span<const TensorView> v) {
          cross_entropy_chunk_backward(ctx, v[0], v[1], lse.slice(r0, n), targets.slice(r0, n), begin, dloss,
                                       vocab_size);
        });
    return;
  }
  float* dx = dlogits.as<float>();
  const float* x = logits.as<float>();
  const float* l = lse.as<float>();
  const std::int32_t* tgt = targets.as<std::int32_t>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* xr = x + n * d.cols;
    float* dr = dx + n * d.cols;  // may be xr: each element is read before it is written
    const float row_lse = l[n];
    const std::int64_t t = tgt[n] - begin;
    const bool has_target = t >= 0 && t < d.live;
    const float target_x = has_target ? xr[t] : 0.0f;  // read before the row is overwritten
#pragma GCC ivdep
    for (std::int64_t v = 0; v < d.live; ++v) dr[v] = vec::exp_approx(xr[v] - row_lse) * dloss;
    if (has_target) dr[t] = (vec::exp_approx(target_x - row_lse) - 1.0f) * dloss;
    if (d.cols > d.live) std::memset(dr + d.live, 0, static_cast<std::size_t>(d.cols - d.live) * sizeof(float));
  }
}

}  // namespace zt::cpu
