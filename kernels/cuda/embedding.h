// CUDA twin of kernels/cpu/embedding.h: token + learned position embedding. wte, wpe and their
// gradients are F32; out and dout are F32 or BF16 (docs/precision.md: bf16 out rounded once).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. tokens [B, T] i32 (on the GPU), wte [Vp, C],
// wpe [max_T, C]. Difference from the CPU: tokens are not checked on the host (that would need a
// copy and a sync); a token outside [0, Vp) writes a row of NaN, so the loss turns NaN and the
// trainer's non-finite check stops the run. The data layer validates every token when it opens a file.
void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);

// dwte[tokens[b, t], :] += dout[b, t, :], dwpe[t, :] += sum over b of dout[b, t, :]. Deterministic:
// positions are stably sorted by token (CUB radix sort) and each token row is summed in (b, t) order
// by one thread per column, as on the CPU, so the result is bitwise equal to the CPU's.
// Out-of-range tokens are skipped.
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);

// Contracts: OpsBackend::embedding_forward_rows / embedding_backward_rows (kernels/contracts/ops_backend.h).
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab);
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab);

}  // namespace zt::cuda
