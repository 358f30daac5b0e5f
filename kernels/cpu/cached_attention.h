// Attention over a key/value cache on the CPU (decoding): the new positions' rows against every
// cached position up to their own, fp32, one (sample, head, new position) per task. Contract:
// OpsBackend::cached_attention_forward (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head = 0);

}  // namespace zt::cpu
