// Helpers the communicator backends share: fp32 staging of F32/BF16 buffers and the fixed-order
// reduction used in deterministic mode.
#pragma once

#include <cstdint>

#include "engine/core/tensor.h"

namespace zt {

// dst = src with dtype conversion (F32 <-> BF16, RNE), same numel.
void convert_copy(TensorView dst, TensorView src);

// out[i] = sum over r = 0..parts-1 (in that order) of in[r * n + i], fp32; then scaled by `scale`.
void ordered_sum(const float* in, int parts, std::int64_t n, float scale, float* out);

}  // namespace zt
