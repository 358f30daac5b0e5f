// Cached attention on the CPU: a query row's scores, softmax and weighted values as
// attention_forward forms that row (each score scaled, the row's maximum subtracted before
// vec::exp_approx, normalised by vec::sum's reciprocal, the values summed in position order); only
// the scores' dot products add in another order (vec::dot's 16 lanes), so a decoding step computes
// the whole window's last rows within fp32 rounding. A step's few rows are a pass over the cache,
// not a tiled product; a prompt's forward (every position new) is the whole window's work without
// its tiles.
#include "kernels/cpu/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/contracts/operand_checks.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head) {
  const CachedAttentionDims d = cached_attention_dims(out, cache, n_head, n_kv_head);
  if (cache.dtype == DType::kBF16) {  // samples staged in fp32
    using detail::Access;
    detail::stage_rows(ctx, {{out, Access::kWrite}, {cache, Access::kRead}},
                       [&](std::int64_t, std::int64_t, std::span<const TensorView> v) {
                         cached_attention_forward(ctx, v[0], v[1], n_head, n_kv_head);
                       });
    return;
  }
  const std::int64_t P = d.T, W = d.W, C = d.C, hs = d.hs, group = d.NH / d.NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* cache_p = cache.as<float>();
  float* out_p = out.as<float>();
  const std::int64_t tasks = d.B * d.NH * d.Tq;
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> scores(static_cast<std::size_t>(P)), acc(static_cast<std::size_t>(hs));
#pragma omp for schedule(static)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t b = task / (d.NH * d.Tq), h = task / d.Tq % d.NH, i = task % d.Tq, g = h / group;
      const std::int64_t len = d.first + i + 1;  // causal: positions [0, len)
      const float* rows = cache_p + b * P * W;
      const float* q = rows + (d.first + i) * W + h * hs;
      for (std::int64_t k = 0; k < len; ++k) {
        scores[static_cast<std::size_t>(k)] = vec::dot(q, rows + k * W + d.k_off + g * hs, hs) * scale;
      }
      const float mx = vec::max(scores.data(), len);
      for (std::int64_t k = 0; k < len; ++k) scores[static_cast<std::size_t>(k)] = vec::exp_approx(scores[k] - mx);
      const float inv_sum = 1.0f / vec::sum(scores.data(), len);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t k = 0; k < len; ++k) {
        const float p = scores[static_cast<std::size_t>(k)] * inv_sum;
        const float* value = rows + k * W + d.v_off + g * hs;
        for (std::int64_t e = 0; e < hs; ++e) acc[static_cast<std::size_t>(e)] += p * value[e];
      }
      std::copy(acc.begin(), acc.end(), out_p + (b * d.Tq + i) * C + h * hs);
    }
  }
}

}  // namespace zt::cpu
