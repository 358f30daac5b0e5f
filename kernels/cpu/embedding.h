// Token + learned position embedding, forward and backward (scatter-add), computed in fp32.
// Contracts: OpsBackend::embedding_* (kernels/contracts/ops_backend.h). Here a token outside the
// table throws InternalError, and each gradient row is summed in (b, t) order at any thread count.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);

// One chunk of a token table split by vocabulary rows across units.
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab);
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab);

}  // namespace zt::cpu
