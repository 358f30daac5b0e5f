// Rotary position embeddings (RoPE, Llama's rotate-half form), forward and backward, in place, in
// fp32, on the q and k heads of a fused q|k|v projection's output (v's columns are left as they
// are); the angles as Hugging Face's LlamaRotaryEmbedding computes them (kernels/contracts/
// rope_angles.h). Contracts: OpsBackend::rope_* (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/rope_angles.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position = 0);
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq);

}  // namespace zt::cpu
