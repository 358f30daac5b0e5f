// Causal self-attention core on the CPU, one (batch, head) pair per task. Each task owns disjoint
// slices of out/att/dqkv, so no reductions cross threads and results are bitwise independent of the
// thread count. K (forward) and V (backward) of the head are transposed into per-thread scratch so
// the score loops run contiguously over key positions and vectorise.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

struct AttnDims {
  std::int64_t B, T, C, NH, hs;
};

AttnDims check_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head) {
  ZT_CHECK(out_like.dtype == DType::kF32 && att.dtype == DType::kF32 && qkv.dtype == DType::kF32,
           "attention is fp32 only");
  ZT_CHECK(qkv.shape.ndim() == 3, "qkv must be [B, T, 3C], has {} dims", qkv.shape.ndim());
  AttnDims d;
  d.B = qkv.shape[0];
  d.T = qkv.shape[1];
  ZT_CHECK(qkv.shape[2] % 3 == 0, "qkv last dim {} is not 3C", qkv.shape[2]);
  d.C = qkv.shape[2] / 3;
  d.NH = n_head;
  ZT_CHECK(n_head > 0 && d.C % n_head == 0, "C={} not divisible by n_head={}", d.C, n_head);
  d.hs = d.C / n_head;
  ZT_CHECK(out_like.numel() == d.B * d.T * d.C && out_like.shape[out_like.shape.ndim() - 1] == d.C,
           "out/dout must be [B={}, T={}, C={}]", d.B, d.T, d.C);
  ZT_CHECK(att.numel() == d.B * d.NH * d.T * d.T, "att must be [B={}, n_head={}, T={}, T]", d.B, d.NH, d.T);
  return d;
}

// dst[d * T + t] = head slice of rows t of src (row stride 3C): a [T, hs] block transposed to [hs, T].
void transpose_head(float* dst, const float* src, std::int64_t T, std::int64_t row_stride, std::int64_t hs) {
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = src + t * row_stride;
    for (std::int64_t e = 0; e < hs; ++e) dst[e * T + t] = row[e];
  }
}

}  // namespace

void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head) {
  const AttnDims d = check_dims(out, att, qkv, n_head);
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* qkv_p = qkv.as<float>();
  float* out_p = out.as<float>();
  float* att_p = att.as<float>();
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> k_t(static_cast<std::size_t>(hs * T));  // this head's keys, [hs, T]
    std::vector<float> acc(static_cast<std::size_t>(hs));
#pragma omp for schedule(static)
    for (std::int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const std::int64_t b = bh / d.NH, h = bh % d.NH;
      const float* base = qkv_p + b * T * C3;
      transpose_head(k_t.data(), base + C + h * hs, T, C3, hs);
      for (std::int64_t t = 0; t < T; ++t) {
        const float* q = base + t * C3 + h * hs;
        float* arow = att_p + (bh * T + t) * T;
        const std::int64_t len = t + 1;  // causal: keys 0..t
        std::memset(arow, 0, static_cast<std::size_t>(T) * sizeof(float));
        for (std::int64_t e = 0; e < hs; ++e) {
          const float qe = q[e];
          const float* ke = k_t.data() + e * T;
          for (std::int64_t t2 = 0; t2 < len; ++t2) arow[t2] += qe * ke[t2];
        }
        for (std::int64_t t2 = 0; t2 < len; ++t2) arow[t2] *= scale;
        const float mx = vec::max(arow, len);
        for (std::int64_t t2 = 0; t2 < len; ++t2) arow[t2] = vec::exp_approx(arow[t2] - mx);
        const float inv_sum = 1.0f / vec::sum(arow, len);
        for (std::int64_t t2 = 0; t2 < len; ++t2) arow[t2] *= inv_sum;

        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t t2 = 0; t2 < len; ++t2) {
          const float a = arow[t2];
          const float* v = base + t2 * C3 + 2 * C + h * hs;
          for (std::int64_t e = 0; e < hs; ++e) acc[e] += a * v[e];
        }
        std::memcpy(out_p + (b * T + t) * C + h * hs, acc.data(), static_cast<std::size_t>(hs) * sizeof(float));
      }
    }
  }
}

void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head) {
  const AttnDims d = check_dims(dout, att, qkv, n_head);
  ZT_CHECK(dqkv.dtype == DType::kF32 && dqkv.numel() == qkv.numel(), "dqkv must be F32 shaped as qkv");
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* qkv_p = qkv.as<float>();
  const float* dout_p = dout.as<float>();
  const float* att_p = att.as<float>();
  float* dqkv_p = dqkv.as<float>();
  const std::int64_t rows = d.B * T;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) std::memset(dqkv_p + r * C3, 0, static_cast<std::size_t>(C3) * sizeof(float));

#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> v_t(static_cast<std::size_t>(hs * T));  // this head's values, [hs, T]
    std::vector<float> datt(static_cast<std::size_t>(T));      // d loss / d att row, then d preatt
    std::vector<float> dq(static_cast<std::size_t>(hs));
#pragma omp for schedule(static)
    for (std::int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const std::int64_t b = bh / d.NH, h = bh % d.NH;
      const float* base = qkv_p + b * T * C3;
      float* dbase = dqkv_p + b * T * C3;
      transpose_head(v_t.data(), base + 2 * C + h * hs, T, C3, hs);
      for (std::int64_t t = 0; t < T; ++t) {
        const float* arow = att_p + (bh * T + t) * T;
        const float* g = dout_p + (b * T + t) * C + h * hs;
        const float* q = base + t * C3 + h * hs;
        const std::int64_t len = t + 1;
        // out[t] = sum_t2 att[t, t2] v[t2]: datt[t2] = g . v[t2], dv[t2] += att[t, t2] g.
        std::fill(datt.begin(), datt.begin() + len, 0.0f);
        for (std::int64_t e = 0; e < hs; ++e) {
          const float ge = g[e];
          const float* ve = v_t.data() + e * T;
          for (std::int64_t t2 = 0; t2 < len; ++t2) datt[t2] += ge * ve[t2];
        }
        for (std::int64_t t2 = 0; t2 < len; ++t2) {
          const float a = arow[t2];
          float* dv = dbase + t2 * C3 + 2 * C + h * hs;
          for (std::int64_t e = 0; e < hs; ++e) dv[e] += a * g[e];
        }
        // Softmax backward from the probabilities alone, with the 1/sqrt(hs) scale folded in.
        const float att_dot_datt = vec::dot(arow, datt.data(), len);
        for (std::int64_t t2 = 0; t2 < len; ++t2) datt[t2] = arow[t2] * (datt[t2] - att_dot_datt) * scale;
        // preatt[t, t2] = q[t] . k[t2]: dq[t] = sum_t2 dpre k[t2], dk[t2] += dpre q[t].
        std::fill(dq.begin(), dq.end(), 0.0f);
        for (std::int64_t t2 = 0; t2 < len; ++t2) {
          const float dp = datt[t2];
          const float* k = base + t2 * C3 + C + h * hs;
          float* dk = dbase + t2 * C3 + C + h * hs;
          for (std::int64_t e = 0; e < hs; ++e) {
            dq[e] += dp * k[e];
            dk[e] += dp * q[e];
          }
        }
        std::memcpy(dbase + t * C3 + h * hs, dq.data(), static_cast<std::size_t>(hs) * sizeof(float));
      }
    }
  }
}

}  // namespace zt::cpu
