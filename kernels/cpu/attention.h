// Causal multi-head self-attention core (after the qkv projection, before the output projection),
// forward and backward, fp32. Softmax subtracts the row maximum before exp. Contracts (shapes,
// grouped-query heads, dropout): OpsBackend::attention_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout = {}, int n_kv_head = 0);

void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout = {}, int n_kv_head = 0);

}  // namespace zt::cpu
