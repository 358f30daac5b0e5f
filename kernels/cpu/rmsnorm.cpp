// RMSNorm on the CPU, one row per task; the weight gradient summed over fixed row chunks whose
// partials are added in chunk order (as the LayerNorm backward does), so it repeats bitwise.
#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/contracts/norm_row_scale.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

constexpr std::int64_t kRowsPerChunk = 32;  // rows per partial sum of dweight (fixed: determinism)
constexpr std::int64_t kColumnBlock = 256;  // columns per task when the partials are added up

struct RowDims {
  std::int64_t rows;
  std::int64_t cols;
};

RowDims check_views(const TensorView& out_like, const TensorView& rstd, const TensorView& inp,
                    const TensorView& weight) {
  ZT_CHECK(rstd.dtype == DType::kF32, "rmsnorm statistics are F32");
  ZT_CHECK(inp.shape.ndim() >= 1);
  RowDims d;
  d.cols = inp.shape[inp.shape.ndim() - 1];
  ZT_CHECK(d.cols > 0);
  d.rows = inp.numel() / d.cols;
  ZT_CHECK(out_like.numel() == inp.numel(), "out/dout has {} elements, inp {}", out_like.numel(), inp.numel());
  ZT_CHECK(rstd.numel() == d.rows, "rstd must have {} elements", d.rows);
  ZT_CHECK(weight.numel() == d.cols, "weight must have {} elements", d.cols);
  return d;
}

// One row of the backward: dinp += its gradient; the row's dweight terms go to the chunk's partial.
inline void backward_row(float* __restrict dinp, float* __restrict dw_part, float* __restrict norm,
                         float* __restrict dnorm, const float* __restrict dout, const float* __restrict inp,
                         const float* __restrict weight, float rstd, std::int64_t C) {
  for (std::int64_t c = 0; c < C; ++c) {
    norm[c] = inp[c] * rstd;
    dnorm[c] = dout[c] * weight[c];
    dw_part[c] += dout[c] * norm[c];
  }
  const float dnorm_norm_mean = vec::dot(dnorm, norm, C) / static_cast<float>(C);
  for (std::int64_t c = 0; c < C; ++c) dinp[c] += rstd * (dnorm[c] - norm[c] * dnorm_norm_mean);
}

}  // namespace

void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps) {
  const RowDims d = check_views(out, rstd, inp, weight);
  ZT_CHECK(eps > 0.0f, "rmsnorm eps {} must be positive", eps);
  const DType act = activation_dtype("rmsnorm_forward", {out, inp});
  check_param_dtype("rmsnorm_forward", act, {weight});
  if (act == DType::kBF16) {
    using detail::Access;
    std::vector<float> weight_f32;
    const TensorView w = detail::widened_f32(ctx, weight, weight_f32);
    detail::stage_rows(ctx,
                       {{detail::as_rows(out, d.cols), Access::kWrite}, {detail::as_rows(inp, d.cols), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         rmsnorm_forward(ctx, v[0], rstd.slice(first, n), v[1], w, eps);
                       });
    return;
  }
  const std::int64_t C = d.cols;
  float* o = out.as<float>();
  float* rstd_p = rstd.as<float>();
  const float* x = inp.as<float>();
  const float* w = weight.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* xr = x + n * C;
    float* orow = o + n * C;  // may be xr: each element is read before it is written
    const float s = norm_row_scale(vec::dot(xr, xr, C) / static_cast<float>(C), eps);
    for (std::int64_t c = 0; c < C; ++c) orow[c] = xr[c] * s * w[c];
    rstd_p[n] = s;
  }
}

void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd) {
  const RowDims d = check_views(dout, rstd, inp, weight);
  ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped like inp");
  const DType act = activation_dtype("rmsnorm_backward", {dinp, dout, inp});
  check_param_dtype("rmsnorm_backward", act, {weight});
  if (act == DType::kBF16) {
    using detail::Access;
    std::vector<float> weight_f32;
    const TensorView w = detail::widened_f32(ctx, weight, weight_f32);
    detail::stage_rows(ctx,
                       {{detail::as_rows(dinp, d.cols), Access::kReadWrite},
                        {detail::as_rows(dout, d.cols), Access::kRead},
                        {detail::as_rows(inp, d.cols), Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         rmsnorm_backward(ctx, v[0], dweight, v[1], v[2], w, rstd.slice(first, n));
                       });
    return;
  }
  ZT_CHECK(dweight.dtype == DType::kF32 && dweight.numel() == d.cols, "dweight must be F32 [{}]", d.cols);
  const std::int64_t C = d.cols;
  const std::int64_t num_chunks = (d.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  if (num_chunks == 0) return;
  std::vector<float> partials(static_cast<std::size_t>(num_chunks * C), 0.0f);  // [num_chunks, C]
  float* di = dinp.as<float>();
  const float* g = dout.as<float>();
  const float* x = inp.as<float>();
  const float* w = weight.as<float>();
  const float* rstd_p = rstd.as<float>();
#pragma omp parallel num_threads(ctx.num_threads)
  {
    std::vector<float> scratch(static_cast<std::size_t>(2 * C));
#pragma omp for schedule(static)
    for (std::int64_t k = 0; k < num_chunks; ++k) {
      const std::int64_t row_end = std::min(d.rows, (k + 1) * kRowsPerChunk);
      for (std::int64_t n = k * kRowsPerChunk; n < row_end; ++n) {
        backward_row(di + n * C, partials.data() + k * C, scratch.data(), scratch.data() + C, g + n * C, x + n * C, w,
                     rstd_p[n], C);
      }
    }
  }
  float* dw = dweight.as<float>();
  const std::int64_t num_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t c0 = blk * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    float sum[kColumnBlock] = {};
    for (std::int64_t k = 0; k < num_chunks; ++k) {  // chunk order
      for (std::int64_t c = c0; c < c1; ++c) sum[c - c0] += partials[static_cast<std::size_t>(k * C + c)];
    }
    for (std::int64_t c = c0; c < c1; ++c) dw[c] += sum[c - c0];
  }
}

}  // namespace zt::cpu
