// Sum of squares of a buffer, for the global gradient norm (each rank sums its shard).
// Contracts: OpsBackend::sum_of_squares* (kernels/contracts/ops_backend.h).
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/exact_square_sum.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// The fixed order: fixed-size chunks are summed, then the chunk sums in index order, so the thread
// count does not change the result.
double sum_of_squares(const ExecContext& ctx, TensorView x);

std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs);

// The exact sum of squares of every view's elements (kernels/contracts/exact_square_sum.h):
// chunks summed as integers on the threads, then added (in any order: integers).
exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs);

}  // namespace zt::cpu
