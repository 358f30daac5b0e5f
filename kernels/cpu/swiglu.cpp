// SwiGLU on the CPU, a row per task; bf16 operands staged through fp32 rows (bf16_staging.h). SiLU's
// sigmoid goes through vec_math.h's exp, which the loops vectorise (libm's expf kept them scalar:
// 24 of a Llama CPU step's 250 ms).
#include "kernels/cpu/swiglu.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

struct Dims {
  std::int64_t rows, hidden;  // N, H
};

Dims check(const TensorView& out_like, const TensorView& gate_up) {
  ZT_CHECK(gate_up.shape.ndim() >= 1 && out_like.shape.ndim() >= 1);
  const std::int64_t two_h = gate_up.shape[gate_up.shape.ndim() - 1];
  ZT_CHECK(two_h > 0 && two_h % 2 == 0, "gate_up's last dimension {} is not 2 H", two_h);
  Dims d{gate_up.numel() / two_h, two_h / 2};
  ZT_CHECK(out_like.numel() == d.rows * d.hidden, "out/dout has {} elements, gate_up {} rows of {}", out_like.numel(),
           d.rows, d.hidden);
  return d;
}

}  // namespace

void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) {
  const Dims d = check(out, gate_up);
  if (activation_dtype("swiglu_forward", {out, gate_up}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx,
        {{detail::as_rows(out, d.hidden), Access::kWrite}, {detail::as_rows(gate_up, 2 * d.hidden), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) { swiglu_forward(ctx, v[0], v[1]); });
    return;
  }
  const std::int64_t H = d.hidden;
  float* o = out.as<float>();
  const float* gu = gate_up.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* g = gu + n * 2 * H;
    const float* u = g + H;
    float* orow = o + n * H;
#pragma GCC ivdep
    for (std::int64_t h = 0; h < H; ++h) orow[h] = g[h] * vec::sigmoid_pair(g[h]).s * u[h];
  }
}

void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout) {
  const Dims d = check(dout, gate_up);
  ZT_CHECK(dgate_up.numel() == gate_up.numel(), "dgate_up must be shaped as gate_up");
  if (activation_dtype("swiglu_backward", {dgate_up, gate_up, dout}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx,
        {{detail::as_rows(dgate_up, 2 * d.hidden), Access::kWrite},
         {detail::as_rows(gate_up, 2 * d.hidden), Access::kRead},
         {detail::as_rows(dout, d.hidden), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) { swiglu_backward(ctx, v[0], v[1], v[2]); });
    return;
  }
  const std::int64_t H = d.hidden;
  float* dgu = dgate_up.as<float>();
  const float* gu = gate_up.as<float>();
  const float* go = dout.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t n = 0; n < d.rows; ++n) {
    const float* g = gu + n * 2 * H;
    const float* u = g + H;
    float* dg = dgu + n * 2 * H;  // may be g: each column's gate and up are read before either is written
    float* du = dg + H;
    const float* gr = go + n * H;
#pragma GCC ivdep
    for (std::int64_t h = 0; h < H; ++h) {
      const float gate = g[h], up = u[h];
      const vec::SigmoidPair sp = vec::sigmoid_pair(gate);
      dg[h] = gr[h] * up * sp.s * (1.0f + gate * sp.one_minus_s);
      du[h] = gr[h] * gate * sp.s;
    }
  }
}

}  // namespace zt::cpu
