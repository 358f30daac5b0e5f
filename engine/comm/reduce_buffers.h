// What the communicator backends share: the execution context of their dtype conversions
// (cpu::cast, one thread: they run between collectives) and the fixed-order reduction of
// deterministic mode.
#pragma once

#include <cstdint>

#include "engine/core/tensor.h"
#include "kernels/cpu/cast.h"
#include "kernels/exec_context.h"

namespace zt {

inline constexpr ExecContext kCommCtx{};

// out[i] = sum over r = 0..parts-1 (in that order) of in[r * n + i], fp32; then scaled by `scale`.
void ordered_sum(const float* in, int parts, std::int64_t n, float scale, float* out);

}  // namespace zt
