// CUDA twin of kernels/cpu/norm.h: sum of squares of a buffer for the global gradient norm.
// Contracts: OpsBackend::sum_of_squares* (kernels/contracts/ops_backend.h).
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/exact_square_sum.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// sum(x^2) of an F32 or BF16 view on the GPU, accumulated in fp64 in a fixed order (the same
// bits on every run of the same size). Waits for the stream: the result is returned to the host.
// Not bitwise equal to the CPU's sum (a different, equally fixed order); the two agree to ~1e-15.
double sum_of_squares(const ExecContext& ctx, TensorView x);

// sum_of_squares of each view (the same values, bit for bit), with one wait for the stream and one
// copy back for all of them instead of one each: the gradient norm visits every unit.
std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs);

// The exact sum of squares of every view's elements (kernels/contracts/exact_square_sum.h): a fixed
// grid of blocks each adds its elements' squares as integers, the partials summed per view on the
// device, the views' sums on the host after one wait.
exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs);

}  // namespace zt::cuda
