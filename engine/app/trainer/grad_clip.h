// Gradient clipping by global norm, torch.nn.utils.clip_grad_norm_'s rule: every gradient is
// multiplied by min(1, max_norm / (norm + 1e-6)), so a norm within 1e-6 below max_norm is scaled by
// a hair too (llm.c's "norm > max_norm ? max_norm / norm : 1" differs there and past it). Each
// rank applies the same coefficient, computed from the all-reduced sum of squares.
#pragma once

#include <cmath>
#include <limits>

namespace zt {

// The factor to multiply gradients by: 1 when clipping is off (max_norm <= 0) or not needed.
inline float clip_coefficient(double grad_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const double coefficient = max_norm / (grad_norm + 1e-6);
  return coefficient < 1.0 ? static_cast<float>(coefficient) : 1.0f;
}

// The largest value whose fp32 square is finite: sqrt(FLT_MAX), 1.8e19.
inline const double kLargestFp32Squarable = std::sqrt(double{std::numeric_limits<float>::max()});

// AdamW squares each gradient element in fp32, as PyTorch's does: past kLargestFp32Squarable the
// square is inf and that element's second moment stays inf, freezing it for good. The engine's fp64
// norm stays finite there, where an fp32 sum of squares is inf already: a step whose applied
// gradient (clipped or not) has a norm past it, where an element's square may overflow, counts as
// non-finite too (clipping keeps it below: only a run with optim.grad_clip = 0 meets it).
inline bool applied_norm_overflows_fp32_squares(double grad_norm, float max_norm) {
  return grad_norm * clip_coefficient(grad_norm, max_norm) > kLargestFp32Squarable;
}

}  // namespace zt
