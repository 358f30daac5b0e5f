// Internal to the CUDA kernels: NormBackwardRows::kFastest's choice for a norm backward's shape.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/base/core/dtype.h"
#include "kernels/cuda/norm_backward_rows.h"
#include "kernels/exec_context.h"

namespace zt::cuda::detail {

// What the choice is keyed on and the scratch a timed run needs.
struct NormRowsShape {
  int norm;  // 0 LayerNorm, 1 RMSNorm
  DType act;
  DType param;
  std::int64_t rows;
  int cols;
  int rows_per_chunk;
  std::int64_t partial_floats_per_chunk;  // the chunk kernel's fp32 partials for one chunk
};

// Runs chunk kernel `which` (kBlock or kWarp) over the first `rows` rows, adding into `dinp` and
// writing `partials` (addresses of the shape's activation dtype and fp32).
using NormChunkLaunch = std::function<void(NormBackwardRows which, void* dinp, float* partials, std::int64_t rows)>;

// Launches the chunk kernel over all of the shape's rows into `dinp` and `partials`: kWarp where
// the block kernel does not apply, `requested` where it is kBlock or kWarp, and for kFastest the one
// measured faster for this shape (timed on its first call, into scratch: the operands are read,
// nothing of the caller's is written).
void launch_norm_backward_rows(const ExecContext& ctx, NormBackwardRows requested, bool block_applies,
                               const NormRowsShape& shape, const NormChunkLaunch& launch, void* dinp, float* partials);

}  // namespace zt::cuda::detail
