// Causal self-attention core on the CPU, one (batch, head) pair per task. Each task owns disjoint
// slices of out/att/dqkv, so nothing is reduced across threads and results are bitwise independent
// of the thread count. Within a task the products run as register-blocked tiles over zero-padded
// per-thread copies of the head's q, k, v (transient scratch, freed when the kernel returns).
// Dropout on the probabilities is fused: each row's mask is regenerated into a per-thread row of
// scale factors (dropout_mask.h) where the row is formed, in forward and again in backward.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

// A tile is kTileRows x kTileCols accumulators: 4 x 16 floats fill 8 of the 16 AVX2 registers,
// leaving room for the loaded and broadcast operands. Padded sizes are multiples of kTileCols.
constexpr std::int64_t kTileRows = 4;
constexpr std::int64_t kTileCols = 16;

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

struct AttnDims : AttentionDims {
  std::int64_t Tp, hsp;  // T and hs rounded up to kTileCols
};

AttnDims check_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head,
                    int n_kv_head) {
  AttnDims d;
  static_cast<AttentionDims&>(d) = attention_dims(out_like, att, qkv, n_head, n_kv_head);
  d.Tp = round_up(d.T, kTileCols);
  d.hsp = round_up(d.hs, kTileCols);
  return d;
}

// Eight floats as one vector (GCC/Clang vector extension): an AVX2 register under x86-64-v3.
// The tiles below are written with it because the auto-vectoriser shuffles rather than keeps a
// 4 x 16 accumulator block in registers.
typedef float f32x8 __attribute__((vector_size(32)));
static_assert(kTileCols == 16, "tiles hold two f32x8 per row");

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }

// out[r][j] = sum_{e < hs} a[r][e] * bt[e][j] for r < kTileRows, j < ncols (a multiple of kTileCols).
void tile_a_times_bt(float* out, std::int64_t out_stride, const float* a, std::int64_t a_stride, const float* bt,
                     std::int64_t bt_stride, std::int64_t hs, std::int64_t ncols) {
  for (std::int64_t j = 0; j < ncols; j += kTileCols) {
    f32x8 acc[kTileRows][2] = {};
    for (std::int64_t e = 0; e < hs; ++e) {
      const f32x8 b0 = load8(bt + e * bt_stride + j);
      const f32x8 b1 = load8(bt + e * bt_stride + j + 8);
      for (int r = 0; r < kTileRows; ++r) {
        const float ar = a[r * a_stride + e];
        acc[r][0] += ar * b0;
        acc[r][1] += ar * b1;
      }
    }
    for (int r = 0; r < kTileRows; ++r) {
      store8(out + r * out_stride + j, acc[r][0]);
      store8(out + r * out_stride + j + 8, acc[r][1]);
    }
  }
}

// out[r][e] = sum_{k0 <= k < k1} w(r, k) * m[k][e] for r < kTileRows, e < width (a multiple of
// kTileCols), where w(r, k) = w[r * w_rs + k * w_cs]: a transposed weight matrix is just strides.
void tile_w_times_m(float* out, std::int64_t out_stride, const float* w, std::int64_t w_rs, std::int64_t w_cs,
                    const float* m, std::int64_t m_stride, std::int64_t k0, std::int64_t k1, std::int64_t width) {
  for (std::int64_t e0 = 0; e0 < width; e0 += kTileCols) {
    f32x8 acc[kTileRows][2] = {};
    for (std::int64_t k = k0; k < k1; ++k) {
      const f32x8 m0 = load8(m + k * m_stride + e0);
      const f32x8 m1 = load8(m + k * m_stride + e0 + 8);
      for (int r = 0; r < kTileRows; ++r) {
        const float wr = w[r * w_rs + k * w_cs];
        acc[r][0] += wr * m0;
        acc[r][1] += wr * m1;
      }
    }
    for (int r = 0; r < kTileRows; ++r) {
      store8(out + r * out_stride + e0, acc[r][0]);
      store8(out + r * out_stride + e0 + 8, acc[r][1]);
    }
  }
}

// dst[t][e] = src[t * src_stride + e] for t < T, e < hs; zero elsewhere in the [Tp, dst_stride] copy.
void copy_head_rows(float* dst, std::int64_t Tp, std::int64_t dst_stride, const float* src, std::int64_t T,
                    std::int64_t src_stride, std::int64_t hs) {
  std::memset(dst, 0, static_cast<std::size_t>(Tp * dst_stride) * sizeof(float));
  for (std::int64_t t = 0; t < T; ++t) std::memcpy(dst + t * dst_stride, src + t * src_stride, hs * sizeof(float));
}

// dst[e][t] = src[t * src_stride + e] for t < T, e < hs; zero for T <= t < Tp. dst is [hs, Tp].
void copy_head_transposed(float* dst, std::int64_t Tp, const float* src, std::int64_t T, std::int64_t src_stride,
                          std::int64_t hs) {
  std::memset(dst, 0, static_cast<std::size_t>(hs * Tp) * sizeof(float));
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t e = 0; e < hs; ++e) dst[e * Tp + t] = src[t * src_stride + e];
  }
}

// Writes rows [r0, min(r0 + kTileRows, T)) of a tile (row stride tile_stride) to dst rows
// (row stride dst_stride), hs floats each.
void store_tile_rows(float* dst, std::int64_t dst_stride, const float* tile, std::int64_t tile_stride, std::int64_t r0,
                     std::int64_t T, std::int64_t hs) {
  for (std::int64_t r = 0; r < kTileRows && r0 + r < T; ++r) {
    std::memcpy(dst + (r0 + r) * dst_stride, tile + r * tile_stride, hs * sizeof(float));
  }
}

// Adds rows [r0, min(r0 + kTileRows, T)) of a tile to acc rows (row stride hs): a kv head's dk or
// dv summed over its query heads, in head order.
void add_tile_rows(float* acc, const float* tile, std::int64_t tile_stride, std::int64_t r0, std::int64_t T,
                   std::int64_t hs) {
  for (std::int64_t r = 0; r < kTileRows && r0 + r < T; ++r) {
    float* a = acc + (r0 + r) * hs;
    const float* t = tile + r * tile_stride;
    for (std::int64_t e = 0; e < hs; ++e) a[e] += t[e];
  }
}

// Row t of head h in sample `sample` is elements [(h * T + t) * T, ... + len) of the sample's mask
// (see attention.h); scale[k] = mask / (1 - p) for its first len = t + 1 (causal) entries.
void dropout_row_scale(const DropoutSpec& dropout, std::int64_t sample, std::int64_t h, std::int64_t t, std::int64_t T,
                       float* scale) {
  dropout_detail::mask_scale_row(dropout, sample, (h * T + t) * T, t + 1, scale);
}

}  // namespace

void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout, int n_kv_head) {
  const AttnDims d = check_dims(out, att, qkv, n_head, n_kv_head);
  dropout_rules::check_spec(dropout, d.NH * d.T * d.T);
  if (qkv.dtype == DType::kBF16) {  // samples staged in fp32, each keeping its global sample index
    using detail::Access;
    detail::stage_rows(ctx, {{out, Access::kWrite}, {att, Access::kWrite}, {qkv, Access::kRead}},
                       [&](std::int64_t first, std::int64_t, std::span<const TensorView> v) {
                         DropoutSpec chunk = dropout;
                         chunk.first_sample += first;
                         attention_forward(ctx, v[0], v[1], v[2], n_head, chunk, n_kv_head);
                       });
    return;
  }
  const bool drop = dropout.active();
  const std::int64_t T = d.T, C = d.C, W = d.W, hs = d.hs, Tp = d.Tp, hsp = d.hsp, group = d.NH / d.NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* qkv_p = qkv.as<float>();
  float* out_p = out.as<float>();
  float* att_p = att.as<float>();
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> k_t(hs * Tp), q_c(Tp * hs), v_c(Tp * hsp);  // this head's k^T, q, v
    std::vector<float> s(kTileRows * Tp), o(kTileRows * hsp);      // a tile's scores, its output rows
    std::vector<float> mask(drop ? T : 0);                         // a row's dropout scale factors
#pragma omp for schedule(static)
    for (std::int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const std::int64_t b = bh / d.NH, h = bh % d.NH, g = h / group;
      const float* row0 = qkv_p + b * T * W;
      copy_head_transposed(k_t.data(), Tp, row0 + d.k_off + g * hs, T, W, hs);
      copy_head_rows(q_c.data(), Tp, hs, row0 + h * hs, T, W, hs);
      copy_head_rows(v_c.data(), Tp, hsp, row0 + d.v_off + g * hs, T, W, hs);
      for (std::int64_t t0 = 0; t0 < T; t0 += kTileRows) {
        const std::int64_t keys = std::min(t0 + kTileRows, T);  // causal: this tile sees keys [0, keys)
        const std::int64_t ncols = round_up(keys, kTileCols);
        tile_a_times_bt(s.data(), Tp, q_c.data() + t0 * hs, hs, k_t.data(), Tp, hs, ncols);
        for (std::int64_t r = 0; r < kTileRows; ++r) {
          float* srow = s.data() + r * Tp;
          const std::int64_t t = t0 + r;
          const std::int64_t len = t < T ? t + 1 : 0;  // rows past T (padding) get all-zero weights
          if (t < T) {
            for (std::int64_t k = 0; k < len; ++k) srow[k] *= scale;
            const float mx = vec::max(srow, len);
            for (std::int64_t k = 0; k < len; ++k) srow[k] = vec::exp_approx(srow[k] - mx);
            const float inv_sum = 1.0f / vec::sum(srow, len);
            for (std::int64_t k = 0; k < len; ++k) srow[k] *= inv_sum;
            float* arow = att_p + (bh * T + t) * T;
            std::memcpy(arow, srow, len * sizeof(float));
            std::memset(arow + len, 0, (T - len) * sizeof(float));
            if (drop) {  // att keeps the probabilities; p @ v uses the dropped ones
              dropout_row_scale(dropout, dropout.first_sample + b, h, t, T, mask.data());
              for (std::int64_t k = 0; k < len; ++k) srow[k] *= mask[k];
            }
          }
          std::memset(srow + len, 0, (ncols - len) * sizeof(float));  // masked keys weigh nothing in p @ v
        }
        tile_w_times_m(o.data(), hsp, s.data(), Tp, 1, v_c.data(), hsp, 0, keys, hsp);
        store_tile_rows(out_p + b * T * C + h * hs, C, o.data(), hsp, t0, T, hs);
      }
    }
  }
}

void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout, int n_kv_head) {
  const AttnDims d = check_dims(dout, att, qkv, n_head, n_kv_head);
  ZT_CHECK(dqkv.dtype == qkv.dtype && dqkv.shape == qkv.shape, "dqkv must be shaped as qkv, in its dtype");
  dropout_rules::check_spec(dropout, d.NH * d.T * d.T);
  if (qkv.dtype == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(ctx, {{dqkv, Access::kWrite}, {dout, Access::kRead}, {qkv, Access::kRead}, {att, Access::kRead}},
                       [&](std::int64_t first, std::int64_t, std::span<const TensorView> v) {
                         DropoutSpec chunk = dropout;
                         chunk.first_sample += first;
                         attention_backward(ctx, v[0], v[1], v[2], v[3], n_head, chunk, n_kv_head);
                       });
    return;
  }
  const bool drop = dropout.active();
  const std::int64_t T = d.T, C = d.C, W = d.W, hs = d.hs, Tp = d.Tp, hsp = d.hsp, group = d.NH / d.NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* qkv_p = qkv.as<float>();
  const float* dout_p = dout.as<float>();
  const float* att_p = att.as<float>();
  float* dqkv_p = dqkv.as<float>();
  // A task per (sample, kv head): its query heads in order, each writing its own dq and adding its
  // dk and dv terms to the kv head's sums, which are then written once. Every element of dqkv is
  // written by exactly one task, so the output is overwritten without a zeroing pass and the
  // result does not depend on the thread count.
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> v_t(hs * Tp), do_c(Tp * hsp), q_c(Tp * hsp), k_c(Tp * hsp);  // head copies
    std::vector<float> p(Tp * Tp);          // this head's att, zero-padded (dropped with dropout); then d preatt
    std::vector<float> mask(drop ? T : 0);  // a row's dropout scale factors
    std::vector<float> dp(kTileRows * Tp), tile(kTileRows * hsp);
    std::vector<float> dk_sum(T * hs), dv_sum(T * hs);  // the kv head's dk and dv over its query heads
#pragma omp for schedule(static)
    for (std::int64_t bg = 0; bg < d.B * d.NKV; ++bg) {
      const std::int64_t b = bg / d.NKV, g = bg % d.NKV;
      const float* row0 = qkv_p + b * T * W;
      float* drow0 = dqkv_p + b * T * W;
      copy_head_transposed(v_t.data(), Tp, row0 + d.v_off + g * hs, T, W, hs);
      copy_head_rows(k_c.data(), Tp, hsp, row0 + d.k_off + g * hs, T, W, hs);
      std::fill(dk_sum.begin(), dk_sum.end(), 0.0f);
      std::fill(dv_sum.begin(), dv_sum.end(), 0.0f);
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        const std::int64_t bh = b * d.NH + h;
        copy_head_rows(q_c.data(), Tp, hsp, row0 + h * hs, T, W, hs);
        copy_head_rows(do_c.data(), Tp, hsp, dout_p + b * T * C + h * hs, T, C, hs);
        // Only att on and below the diagonal is read; the copy is zero everywhere else.
        for (std::int64_t t = 0; t < Tp; ++t) {
          float* prow = p.data() + t * Tp;
          const std::int64_t len = t < T ? t + 1 : 0;
          std::memcpy(prow, att_p + (bh * T + t) * T, len * sizeof(float));
          std::memset(prow + len, 0, (Tp - len) * sizeof(float));
          if (drop && t < T) {
            dropout_row_scale(dropout, dropout.first_sample + b, h, t, T, mask.data());
            for (std::int64_t k = 0; k < len; ++k) prow[k] *= mask[k];
          }
        }

        // out = p @ v:  dv[s] = sum_{t >= s} p[t][s] do[t]  (p is zero above the diagonal). With
        // dropout, p holds pd = att * mask / (1 - dropout.p), the weights the forward applied to v.
        for (std::int64_t s0 = 0; s0 < T; s0 += kTileRows) {
          tile_w_times_m(tile.data(), hsp, p.data() + s0, 1, Tp, do_c.data(), hsp, s0, T, hsp);
          add_tile_rows(dv_sum.data(), tile.data(), hsp, s0, T, hs);
        }
        // dp = do @ v^T, then the softmax backward from the probabilities alone, with the 1/sqrt(hs)
        // scale folded in: p[t][k] becomes dpreatt = p (dp - sum_k' p dp) * scale, in place.
        for (std::int64_t t0 = 0; t0 < T; t0 += kTileRows) {
          const std::int64_t ncols = round_up(std::min(t0 + kTileRows, T), kTileCols);
          tile_a_times_bt(dp.data(), Tp, do_c.data() + t0 * hsp, hsp, v_t.data(), Tp, hs, ncols);
          for (std::int64_t r = 0; r < kTileRows && t0 + r < T; ++r) {
            const std::int64_t len = t0 + r + 1;
            float* prow = p.data() + (t0 + r) * Tp;
            const float* dprow = dp.data() + r * Tp;
            const float p_dot_dp = vec::dot(prow, dprow, len);
            if (!drop) {
              for (std::int64_t k = 0; k < len; ++k) prow[k] = prow[k] * (dprow[k] - p_dot_dp) * scale;
            } else {
              // datt = dp * mask / (1 - dropout.p), dpreatt = att (datt - sum att datt). As
              // att * datt = pd * dp, that sum is p_dot_dp and dpreatt = pd dp - att p_dot_dp: the
              // mask enters only through pd, and att is read again from the forward's output.
              const float* arow = att_p + (bh * T + t0 + r) * T;
              for (std::int64_t k = 0; k < len; ++k) prow[k] = (prow[k] * dprow[k] - arow[k] * p_dot_dp) * scale;
            }
          }
        }
        // preatt = q @ k^T:  dq[t] = sum_{k <= t} dpre[t][k] k[k],  dk[s] = sum_{t >= s} dpre[t][s] q[t].
        for (std::int64_t t0 = 0; t0 < T; t0 += kTileRows) {
          const std::int64_t keys = std::min(t0 + kTileRows, T);
          tile_w_times_m(tile.data(), hsp, p.data() + t0 * Tp, Tp, 1, k_c.data(), hsp, 0, keys, hsp);
          store_tile_rows(drow0 + h * hs, W, tile.data(), hsp, t0, T, hs);
        }
        for (std::int64_t s0 = 0; s0 < T; s0 += kTileRows) {
          tile_w_times_m(tile.data(), hsp, p.data() + s0, 1, Tp, q_c.data(), hsp, s0, T, hsp);
          add_tile_rows(dk_sum.data(), tile.data(), hsp, s0, T, hs);
        }
      }
      for (std::int64_t t = 0; t < T; ++t) {
        std::memcpy(drow0 + t * W + d.k_off + g * hs, dk_sum.data() + t * hs, hs * sizeof(float));
        std::memcpy(drow0 + t * W + d.v_off + g * hs, dv_sum.data() + t * hs, hs * sizeof(float));
      }
    }
  }
}

}  // namespace zt::cpu
