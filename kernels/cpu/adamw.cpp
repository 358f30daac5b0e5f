// AdamW on the CPU, element-wise over a flat parameter range, in torch.optim.AdamW's order of
// operations (single-tensor path) so results track PyTorch closely. Templated on the gradient and
// working-copy types so the bf16 paths cost no per-element branches.
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <cstdint>

#include "engine/base/core/bf16.h"

namespace zt::cpu {

namespace {

struct NoWorkingCopy {};

inline float load(float g) { return g; }
inline float load(bf16 g) { return bf16_to_float(g); }
inline void store(NoWorkingCopy*, std::int64_t, float) {}
inline void store(float* w, std::int64_t i, float p) { w[i] = p; }
inline void store(bf16* w, std::int64_t i, float p) { w[i] = float_to_bf16(p); }

template <typename G, typename W>
void adamw_typed(const ExecContext& ctx, float* param, const G* grad, float* m, float* v, W* working, std::int64_t n,
                 const AdamWCoeffs& k, float grad_scale) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = load(grad[i]) * grad_scale;
    float p = param[i] * k.decay;
    const float mi = m[i] + k.one_minus_beta1 * (g - m[i]);  // exp_avg.lerp_(grad, 1 - beta1)
    const float vi = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
    const float denom = std::sqrt(vi) / k.bc2_sqrt + k.eps;
    p = p - k.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    store(working, i, p);
  }
}

template <typename G>
void dispatch_working(const ExecContext& ctx, float* param, const G* grad, float* m, float* v, TensorView working,
                      std::int64_t n, const AdamWCoeffs& k, float grad_scale) {
  if (working.data == nullptr) {
    adamw_typed(ctx, param, grad, m, v, static_cast<NoWorkingCopy*>(nullptr), n, k, grad_scale);
  } else if (working.dtype == DType::kF32) {
    adamw_typed(ctx, param, grad, m, v, working.as<float>(), n, k, grad_scale);
  } else {
    adamw_typed(ctx, param, grad, m, v, working.as<bf16>(), n, k, grad_scale);
  }
}

}  // namespace

void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) {
  check_adamw_operands(param, grad, m, v, working_out);
  const std::int64_t n = param.numel();
  ZT_CHECK(step >= 1, "AdamW step is 1-based, got {}", step);

  const AdamWCoeffs k = adamw_coeffs(hyper, step);

  float* p = param.as<float>();
  float* mp = m.as<float>();
  float* vp = v.as<float>();
  if (grad.dtype == DType::kF32) {
    dispatch_working(ctx, p, grad.as<float>(), mp, vp, working_out, n, k, grad_scale);
  } else {
    dispatch_working(ctx, p, grad.as<bf16>(), mp, vp, working_out, n, k, grad_scale);
  }
}

void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale) {
  AdamWHyper h = hyper;
  for (const AdamWSlice& s : slices) {
    h.weight_decay = s.decays ? hyper.weight_decay : 0.0f;
    adamw_update(ctx, s.param, s.grad, s.m, s.v, s.working, h, step, grad_scale);
  }
}

}  // namespace zt::cpu
