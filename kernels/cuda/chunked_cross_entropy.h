// CUDA twin of kernels/cpu/chunked_cross_entropy.h: softmax + cross-entropy over vocabulary
// chunks, for an LM head that never holds all the logits. Chunk logits F32 or BF16, row
// statistics F32, all on the GPU. Targets are not range-checked on the host (that needs a sync):
// one outside [0, vocab_size) gives its row a NaN loss, as the whole-row kernel does.
// Contracts: OpsBackend::cross_entropy_chunk_* (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first);
void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit);
void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size);

}  // namespace zt::cuda
