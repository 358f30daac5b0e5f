// The AdamW contract's definitions (see the header).
#include "kernels/contracts/adamw_params.h"

#include <cmath>

#include "engine/base/core/check.h"

namespace zt {

AdamWCoeffs adamw_coeffs(const AdamWHyper& hyper, int step) {
  const double lr = hyper.lr, beta1 = hyper.beta1, beta2 = hyper.beta2;
  AdamWCoeffs k;
  k.decay = static_cast<float>(1.0 - lr * static_cast<double>(hyper.weight_decay));
  k.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  k.beta2 = hyper.beta2;
  k.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  k.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
  k.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  k.eps = hyper.eps;
  return k;
}

void check_adamw_operands(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
                          const TensorView& working_out) {
  const std::int64_t n = param.numel();
  ZT_CHECK(param.dtype == DType::kF32 && m.dtype == DType::kF32 && v.dtype == DType::kF32,
           "param, m and v must be F32");
  ZT_CHECK(grad.dtype == DType::kF32 || grad.dtype == DType::kBF16, "grad must be F32 or BF16, is {}",
           dtype_name(grad.dtype));
  ZT_CHECK(grad.numel() == n && m.numel() == n && v.numel() == n,
           "adamw: lengths differ (param {}, grad {}, m {}, v {})", n, grad.numel(), m.numel(), v.numel());
  if (working_out.data != nullptr) {
    ZT_CHECK(working_out.dtype == DType::kF32 || working_out.dtype == DType::kBF16, "working_out must be F32 or BF16");
    ZT_CHECK(working_out.numel() == n, "working_out has {} elements, param {}", working_out.numel(), n);
  }
}

}  // namespace zt
