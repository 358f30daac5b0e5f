// What the communicator backends share: the execution context of their dtype conversions
// (ops::cast on the CPU, one thread: they run between collectives) and the fixed-order reduction of
// deterministic mode.
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"
#include "kernels/ops.h"

namespace zt {

inline constexpr ExecContext kCommCtx{};

// out[i] = sum over r = 0..parts-1 (in that order) of in[r * n + i], fp32; then scaled by `scale`.
void ordered_sum(const float* in, int parts, std::int64_t n, float scale, float* out);

}  // namespace zt
