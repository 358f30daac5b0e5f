// LayerNorm on the CPU, one row per task. Backward sums the weight/bias gradients over rows in
// fixed-size row chunks whose partials are then added in chunk order, so the result depends on
// the shapes only, never on the thread count (activation recompute relies on bitwise repeats).
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/contracts/norm_row_scale.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

// Rows per partial sum of dweight/dbias. Fixed (not derived from the thread count) for determinism.
constexpr std::int64_t kRowsPerChunk = 32;
// Columns per task when the chunk partials are added up.
constexpr std::int64_t kColumnBlock = 256;

struct RowDims {
  std::int64_t rows;
  std::int64_t cols;
};

// Checks the views forward and backward share; out_like is out (forward) or dout (backward). The
// parameters' dtypes depend on the activations': check_param_dtype in the public functions.
RowDims check_views(const TensorView& out_like, const TensorView& mean, const TensorView& rstd, const TensorView& inp,
                    const TensorView& weight) {
  for (const TensorView* v : {&mean, &rstd}) ZT_CHECK(v->dtype == DType::kF32, "layernorm statistics are F32");
  ZT_CHECK(inp.shape.ndim() >= 1);
  RowDims d;
  d.cols = inp.shape[inp.shape.ndim() - 1];
  ZT_CHECK(d.cols > 0);
  d.rows = inp.numel() / d.cols;
  ZT_CHECK(out_like.numel() == inp.numel(), "out/dout has {} elements, inp {}", out_like.numel(), inp.numel());
  ZT_CHECK(mean.numel() == d.rows && rstd.numel() == d.rows, "mean/rstd must have {} elements", d.rows);
  ZT_CHECK(weight.numel() == d.cols, "weight must have {} elements", d.cols);
  return d;
}

// One row of the backward: dinp += its gradient, and the row's dweight/dbias terms are added to
// the chunk's partials. norm and dnorm are C-float scratch. Separate (and restrict-qualified) so
// the loops see plain, non-aliasing pointers and vectorise.
inline void backward_row(float* __restrict dinp, float* __restrict dw_part, float* __restrict db_part,
                         float* __restrict norm, float* __restrict dnorm, const float* __restrict dout,
                         const float* __restrict inp, const float* __restrict weight, float mean, float rstd,
                         std::int64_t C) {
  for (std::int64_t c = 0; c < C; ++c) {
    norm[c] = (inp[c] - mean) * rstd;
    dnorm[c] = dout[c] * weight[c];
    dw_part[c] += dout[c] * norm[c];
    db_part[c] += dout[c];
  }
  const float dnorm_mean = vec::sum(dnorm, C) / static_cast<float>(C);
  const float dnorm_norm_mean = vec::dot(dnorm, norm, C) / static_cast<float>(C);
  for (std::int64_t c = 0; c < C; ++c) {
    dinp[c] += rstd * (dnorm[c] - dnorm_mean - norm[c] * dnorm_norm_mean);
  }
}

}  // namespace

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  const RowDims d = check_views(out, mean, rstd, inp, weight);
  const DType act = activation_dtype("layernorm_forward", {out, inp});
  check_param_dtype("layernorm_forward", act, {weight, bias});
  ZT_CHECK(bias.dtype == weight.dtype && bias.numel() == d.cols, "bias must be {} [{}] like the weight",
           dtype_name(weight.dtype), d.cols);
  if (act == DType::kBF16) {
    using detail::Access;
    std::vector<float> weight_f32, bias_f32;
    const TensorView w = detail::widened_f32(ctx, weight, weight_f32), b = detail::widened_f32(ctx, bias, bias_f32);
    detail::stage_rows(ctx,
                       {{detail::as_rows(out, d.cols), Access::kWrite}, {detail::as_rows(inp, d.cols), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         layernorm_forward(ctx, v[0], mean.slice(first, n), rstd.slice(first, n), v[1], w, b);
                       });
    return;
  }
  const std::int64_t C = d.cols;
  float* o = out.as<float>();
  float* mean_p = mean.as<float>();
  float* rstd_p = rstd.as<float>();
  const float* x = inp.as<float>();
  const float* w = weight.as<float>();
  const float* b = bias.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* xr = x + n * C;
    float* orow = o + n * C;
    const float m = vec::sum(xr, C) / static_cast<float>(C);
    // Two-pass variance: (x - mean)^2 stays accurate when |mean| >> std. orow is the scratch.
    for (std::int64_t c = 0; c < C; ++c) orow[c] = xr[c] - m;
    const float var = vec::dot(orow, orow, C) / static_cast<float>(C);
    const float s = norm_row_scale(var, kLayerNormEps);
    for (std::int64_t c = 0; c < C; ++c) orow[c] = orow[c] * s * w[c] + b[c];
    mean_p[n] = m;
    rstd_p[n] = s;
  }
}

void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd) {
  const RowDims d = check_views(dout, mean, rstd, inp, weight);
  ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped like inp");
  const DType act = activation_dtype("layernorm_backward", {dinp, dout, inp});
  check_param_dtype("layernorm_backward", act, {weight});
  if (act == DType::kBF16) {
    using detail::Access;
    std::vector<float> weight_f32;
    const TensorView w = detail::widened_f32(ctx, weight, weight_f32);
    detail::stage_rows(ctx,
                       {{detail::as_rows(dinp, d.cols), Access::kReadWrite},
                        {detail::as_rows(dout, d.cols), Access::kRead},
                        {detail::as_rows(inp, d.cols), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         layernorm_backward(ctx, v[0], dweight, dbias, v[1], v[2], w, mean.slice(first, n),
                                            rstd.slice(first, n));
                       });
    return;
  }
  ZT_CHECK(dweight.dtype == DType::kF32 && dweight.numel() == d.cols, "dweight must be F32 [{}]", d.cols);
  ZT_CHECK(dbias.dtype == DType::kF32 && dbias.numel() == d.cols, "dbias must be F32 [{}]", d.cols);
  const std::int64_t C = d.cols;
  const std::int64_t num_chunks = (d.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  if (num_chunks == 0) return;
  // partials[k] holds chunk k's dweight sums, then its dbias sums: [num_chunks, 2, C].
  std::vector<float> partials(static_cast<std::size_t>(num_chunks * 2 * C), 0.0f);

  float* di = dinp.as<float>();
  const float* g = dout.as<float>();
  const float* x = inp.as<float>();
  const float* w = weight.as<float>();
  const float* mean_p = mean.as<float>();
  const float* rstd_p = rstd.as<float>();
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> scratch(static_cast<std::size_t>(2 * C));
    float* norm = scratch.data();  // (x - mean) * rstd of the current row
    float* dnorm = norm + C;       // dout * weight of the current row
#pragma omp for schedule(static)
    for (std::int64_t k = 0; k < num_chunks; ++k) {
      float* dw_part = partials.data() + k * 2 * C;
      float* db_part = dw_part + C;
      const std::int64_t row_end = std::min(d.rows, (k + 1) * kRowsPerChunk);
      for (std::int64_t n = k * kRowsPerChunk; n < row_end; ++n) {
        const float* xr = x + n * C;
        const float* gr = g + n * C;
        float* dir = di + n * C;
        backward_row(dir, dw_part, db_part, norm, dnorm, gr, xr, w, mean_p[n], rstd_p[n], C);
      }
    }
  }

  float* dw = dweight.as<float>();
  float* db = dbias.as<float>();
  const std::int64_t num_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t c0 = blk * kColumnBlock;
    const std::int64_t c1 = std::min(C, c0 + kColumnBlock);
    float dw_sum[kColumnBlock] = {};
    float db_sum[kColumnBlock] = {};
    for (std::int64_t k = 0; k < num_chunks; ++k) {
      const float* dw_part = partials.data() + k * 2 * C;
      const float* db_part = dw_part + C;
      for (std::int64_t c = c0; c < c1; ++c) {
        dw_sum[c - c0] += dw_part[c];
        db_sum[c - c0] += db_part[c];
      }
    }
    for (std::int64_t c = c0; c < c1; ++c) {
      dw[c] += dw_sum[c - c0];
      db[c] += db_sum[c - c0];
    }
  }
}

void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias) {
  residual_forward(ctx, residual, a, b);
  layernorm_forward(ctx, out, mean, rstd, residual, weight, bias);
}

}  // namespace zt::cpu
