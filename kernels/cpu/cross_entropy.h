// Fused softmax + cross-entropy over a padded vocabulary, fp32. Only the first vocab_size columns
// of the [N, Vp] logits are real. Contracts: OpsBackend::softmax_cross_entropy_*
// (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size);

void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size);

// Here the two calls above in turn (the probabilities live only in dlogits in between), so the
// bits are theirs; the CUDA twin does it in one pass over the logits.
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size);

}  // namespace zt::cpu
