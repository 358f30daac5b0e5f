// CUDA twin of kernels/cpu/cached_attention.h: attention of a key/value cache's new positions
// (decoding), F32 or BF16, grouped-query heads, head sizes up to 256.
// Contract: OpsBackend::cached_attention_forward (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// The largest head size the kernel takes (32 lanes x 8 dimensions a lane).
constexpr std::int64_t kCachedAttentionMaxHeadSize = 256;

void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head = 0);

}  // namespace zt::cuda
