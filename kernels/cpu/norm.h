// Sum of squares of a buffer, for the global gradient norm (each rank sums its shard).
#pragma once

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// sum(x^2) of an F32 or BF16 view, accumulated in fp64 in a fixed order (thread count does not
// change the result: fixed-size chunks are summed, then the chunk sums in index order).
double sum_of_squares(const ExecContext& ctx, TensorView x);

}  // namespace zt::cpu
