// Internal to the CPU kernels: the mask of [Note: dropout masks] as rows of scale factors
// (1 / (1 - p) where kept, 0 where dropped), so dropout.cpp and the fused attention dropout share
// one generator (Philox blocks in batches, so its rounds vectorise). Not part of the kernel API.
#pragma once

#include <cstdint>

#include "kernels/cpu/dropout.h"

namespace zt::cpu::dropout_detail {

// scale[i] = dropout_keep(spec, sample, j0 + i) ? keep_scale(spec.p) : 0 for i < n.
void mask_scale_row(const DropoutSpec& spec, std::int64_t sample, std::int64_t j0, std::int64_t n, float* scale);

}  // namespace zt::cpu::dropout_detail
