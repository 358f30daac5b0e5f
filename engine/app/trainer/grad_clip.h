// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_'s rule): every gradient is
// multiplied by max_norm / (norm + 1e-6) when the norm exceeds max_norm. Each rank applies the
// same coefficient, computed from the all-reduced sum of squares.
#pragma once

namespace zt {

// The factor to multiply gradients by: 1 when clipping is off (max_norm <= 0) or not needed.
inline float clip_coefficient(double grad_norm, float max_norm) {
  if (max_norm <= 0.0f || grad_norm <= max_norm) return 1.0f;
  return static_cast<float>(max_norm / (grad_norm + 1e-6));
}

}  // namespace zt
