// CUDA twin of kernels/cpu/norm.h: sum of squares of a buffer for the global gradient norm.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// sum(x^2) of an F32 or BF16 view on the GPU, accumulated in fp64 in a fixed order (the same
// bits on every run of the same size). Waits for the stream: the result is returned to the host.
// Not bitwise equal to the CPU's sum (a different, equally fixed order); the two agree to ~1e-15.
double sum_of_squares(const ExecContext& ctx, TensorView x);

}  // namespace zt::cuda
