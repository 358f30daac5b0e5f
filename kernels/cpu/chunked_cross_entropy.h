// Softmax + cross-entropy over vocabulary chunks, for an LM head that never holds all the logits
// (docs/memory.md, "the head in vocabulary chunks"). The logits [N, Vp] arrive one chunk of
// columns [begin, begin + Vc) at a time; an online softmax keeps each row's running max and sum of
// exponentials, and the target's logit, so the loss follows after the last chunk; the backward
// takes each chunk again (recomputed by the caller) with the rows' log-sum-exps. Columns at or
// past vocab_size are padding: they never enter the softmax and get gradient 0. Computed in fp32
// with each chunk's sum of exponentials in fp64; chunk logits F32 or BF16 (widened on load), the
// row statistics F32.
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// Folds the chunk `logits` [N, Vc] (columns begin .. begin + Vc of the full logits) into the row
// statistics [N]: row_max and row_sum, the max and the sum of exp(x - max) over the real columns
// seen so far, and target_logit, the logit of targets[n] once its chunk has been seen. The first
// chunk (`first`) sets them; later ones rescale the sum to the new max. A chunk with no real
// column changes nothing.
void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first);

// After the last chunk: losses[n] = log(row_sum) + row_max - target_logit and lse[n] = row_max +
// log(row_sum), each row's log-sum-exp for the backward (lse may alias row_max).
void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit);

// dlogits [N, Vc] = (exp(logits - lse) - [begin + j == targets[n]]) * dloss over the chunk's real
// columns, 0 on padding (may alias logits).
void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size);

}  // namespace zt::cpu
