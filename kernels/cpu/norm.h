// Sum of squares of a buffer, for the global gradient norm (each rank sums its shard).
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// sum(x^2) of an F32 or BF16 view, accumulated in fp64 in a fixed order (thread count does not
// change the result: fixed-size chunks are summed, then the chunk sums in index order).
double sum_of_squares(const ExecContext& ctx, TensorView x);

// sum_of_squares of each view, in order (the same value each call above returns).
std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs);

}  // namespace zt::cpu
