// Cached attention on the CPU: a query row's scores, softmax and weighted values as
// attention_forward forms that row (each score scaled, the row's maximum subtracted before
// vec::exp_approx, normalised by vec::sum's reciprocal, the values summed in position order); only
// the scores' dot products add in another order (16 lanes, then the lanes in a fixed order), so a
// decoding step computes the whole window's last rows within fp32 rounding. A step's few rows are
// a pass over the cache, not a tiled product; a prompt's forward (every position new) is the
// whole window's work without its tiles.
#include "kernels/cpu/cached_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/contracts/operand_checks.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

// Eight floats as one vector (GCC/Clang vector extension: an AVX2 register under x86-64-v3).
typedef float f32x8 __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// a . b over n elements: two 8-lane partial sums (independent chains, so the loop is not bound by
// one add's latency), then lanes 0-7 of their sum in order, then the tail.
float dot(const float* a, const float* b, std::int64_t n) {
  f32x8 acc0 = {}, acc1 = {};
  std::int64_t e = 0;
  for (; e + 16 <= n; e += 16) {
    acc0 += load8(a + e) * load8(b + e);
    acc1 += load8(a + e + 8) * load8(b + e + 8);
  }
  for (; e + 8 <= n; e += 8) acc0 += load8(a + e) * load8(b + e);
  const f32x8 acc = acc0 + acc1;
  float sum = 0.0f;
  for (int lane = 0; lane < 8; ++lane) sum += acc[lane];
  for (; e < n; ++e) sum += a[e] * b[e];
  return sum;
}

}  // namespace

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
        scores[static_cast<std::size_t>(k)] = dot(q, rows + k * W + d.k_off + g * hs, hs) * scale;
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
