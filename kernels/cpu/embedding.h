// Token + learned position embedding, forward and backward (scatter-add), computed in fp32.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. tokens [B, T] i32, wte [Vp, C], wpe [max_T, C],
// or a wpe without data: no position table (a rotary model's embedding), out = wte[tokens[b, t], :].
// The tables are F32, or BF16 (both) with a BF16 out (check_param_dtype): the sum is taken in fp32.
// Throws InternalError if a token is outside [0, Vp).
void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);

// dwte[tokens[b, t], :] += dout[b, t, :], dwpe[t, :] += sum over b of dout[b, t, :]; dwte and dwpe F32.
// Deterministic: each output row is summed in (b, t) order whatever the thread count.
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);

// One chunk of a token table split by vocabulary rows across units: wte_rows [R, C] holds rows
// [row_begin, row_begin + R) of a vocabulary of `vocab` rows. The forward writes out[b, t, :] =
// wte_rows[tokens[b, t] - row_begin, :] + wpe[t, :] for the positions whose token is in the
// chunk and leaves the others as they are: over all the chunks every position is written once,
// with embedding_forward's bits. Throws InternalError if a token is outside [0, vocab).
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab);
// dwte_rows[tokens[b, t] - row_begin, :] += dout[b, t, :] for the positions in the chunk and, when
// dwpe is not empty, dwpe[t, :] += dout[b, t, :] for every position; each row summed in (b, t)
// order, so the chunks together give embedding_backward's bits.
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab);

}  // namespace zt::cpu
