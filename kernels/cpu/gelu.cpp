// GELU (tanh approximation) on the CPU. 0.5 x (1 + tanh(a)) is evaluated as x * sigmoid(2a),
// which needs one exp (vectorised, vec_math.h) and stays accurate where tanh(a) is close to +-1.
#include "kernels/cpu/gelu.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/vec_math.h"

namespace zt::cpu {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubicCoeff = 0.044715f;
// Elements per parallel task: large enough to amortise scheduling, small enough to balance.
constexpr std::int64_t kBlock = 16384;

// s = sigmoid(2a) = 0.5 (1 + tanh(a)) and 1 - s, for a = sqrt(2/pi) (x + 0.044715 x^3), both from
// exp(-2|a|) (vec::sigmoid_pair).
inline vec::SigmoidPair gelu_sigmoid(float x) {
  const float a = kSqrt2OverPi * (x + kCubicCoeff * x * x * x);
  return vec::sigmoid_pair(2.0f * a);
}

}  // namespace

void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) {
  ZT_CHECK(out.numel() == inp.numel(), "out has {} elements, inp {}", out.numel(), inp.numel());
  if (activation_dtype("gelu_forward", {out, inp}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx, {{detail::as_rows(out, 1), Access::kWrite}, {detail::as_rows(inp, 1), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) { gelu_forward(ctx, v[0], v[1]); });
    return;
  }
  const std::int64_t n = inp.numel();
  float* o = out.as<float>();
  const float* x = inp.as<float>();
  const std::int64_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
    // out/dinp may alias an input; every element is read before it is written.
#pragma GCC ivdep
    for (std::int64_t i = blk * kBlock; i < end; ++i) {
      const float xi = x[i];
      o[i] = xi * gelu_sigmoid(xi).s;
    }
  }
}

void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) {
  ZT_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: element counts differ");
  if (activation_dtype("gelu_backward", {dinp, inp, dout}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx,
        {{detail::as_rows(dinp, 1), Access::kWrite},
         {detail::as_rows(inp, 1), Access::kRead},
         {detail::as_rows(dout, 1), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) { gelu_backward(ctx, v[0], v[1], v[2]); });
    return;
  }
  const std::int64_t n = inp.numel();
  float* di = dinp.as<float>();
  const float* x = inp.as<float>();
  const float* g = dout.as<float>();
  const std::int64_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
    // out/dinp may alias an input; every element is read before it is written.
#pragma GCC ivdep
    for (std::int64_t i = blk * kBlock; i < end; ++i) {
      // d/dx [x s] with s = sigmoid(2a): s + x * 2 s (1 - s) * da/dx, since sech^2(a) = 4 s (1 - s).
      const float xi = x[i];
      const vec::SigmoidPair sp = gelu_sigmoid(xi);
      const float da_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubicCoeff * xi * xi);
      di[i] = g[i] * (sp.s + 2.0f * xi * sp.s * sp.one_minus_s * da_dx);
    }
  }
}

}  // namespace zt::cpu
