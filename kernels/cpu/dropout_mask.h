// Internal to the CPU kernels: the mask of [Note: dropout masks] as rows of scale factors
// (1 / (1 - p) where kept, 0 where dropped), so dropout.cpp and the fused attention dropout share
// one generator (Philox blocks in batches, so its rounds vectorise). Not part of the kernel API.
#pragma once

#include <cstdint>

#include "kernels/cpu/dropout.h"

namespace zt::cpu::dropout_detail {

// Checks p in [0, 1) and that `elems_per_sample` elements fit the 32-bit Philox block counter.
void check_spec(const DropoutSpec& spec, std::int64_t elems_per_sample);

// A dropout's operands as samples: `samples` rows (in's leading dimension) of `per_sample` elements.
struct MaskRows {
  std::int64_t samples, per_sample;
};
// The operand checks every dropout kernel (CPU and CUDA) makes, `what` naming the op: fp32 out and
// in of one element count, a leading sample dimension, and check_spec over a sample.
MaskRows check_operands(const TensorView& out, const TensorView& in, const DropoutSpec& spec, const char* what);

// round(p * 2^32), saturated to 2^32 - 1: element kept iff its 32 random bits are >= this.
std::uint32_t keep_threshold(float p);

// 1 / (1 - p) rounded once to fp32: the factor kept elements are multiplied by.
float keep_scale(float p);

// scale[i] = dropout_keep(spec, sample, j0 + i) ? keep_scale(spec.p) : 0 for i < n.
void mask_scale_row(const DropoutSpec& spec, std::int64_t sample, std::int64_t j0, std::int64_t n, float* scale);

}  // namespace zt::cpu::dropout_detail
