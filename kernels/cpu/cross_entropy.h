// Fused softmax + cross-entropy over a padded vocabulary, fp32. Only the first vocab_size columns
// of the [N, Vp] logits are real: padded columns never enter the softmax and get zero gradient.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// losses[N] = -log softmax(logits[n, :vocab_size])[targets[n]]; probs[N, Vp] = that softmax, with
// padded columns set to 0. probs may alias logits (in-place). targets [N] i32 in [0, vocab_size).
void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size);

// dlogits[n, v] = (probs[n, v] - [v == targets[n]]) * dloss for v < vocab_size, 0 for padded v
// (overwritten; may alias probs). dloss is d(total loss)/d(losses[n]), e.g. 1/N for the mean.
void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size);

// The forward then the backward over the same logits, for a training step whose loss gradient is
// known before its backward: losses as the forward's, dlogits as the backward's (may alias logits;
// the probabilities live only in dlogits in between). Here the two calls above in turn, so the
// bits are theirs; the CUDA twin does it in one pass over the logits.
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size);

}  // namespace zt::cpu
