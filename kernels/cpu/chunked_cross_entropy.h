// Softmax + cross-entropy over vocabulary chunks, for an LM head that never holds all the logits
// (docs/memory.md, "the head in vocabulary chunks"). The logits [N, Vp] arrive one chunk of
// columns [begin, begin + Vc) at a time; an online softmax keeps each row's running max and sum of
// exponentials, and the target's logit, so the loss follows after the last chunk; the backward
// takes each chunk again (recomputed by the caller) with the rows' log-sum-exps. Columns at or
// past vocab_size are padding: they never enter the softmax and get gradient 0. Computed in fp32
// with each chunk's sum of exponentials in fp64; chunk logits F32 or BF16 (widened on load), the
// row statistics F32. Contracts: OpsBackend::cross_entropy_chunk_* (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first);

void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit);

void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size);

}  // namespace zt::cpu
