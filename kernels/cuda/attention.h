// CUDA twin of kernels/cpu/attention.h: causal multi-head self-attention core, as cuBLASLt
// strided-batched products (one batch of heads per sample) around a fused causal softmax, on F32
// or BF16 activations (docs/precision.md; [Note: bf16 attention] in attention.cu).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"  // DropoutSpec
#include "kernels/exec_context.h"

namespace zt::cuda {

using zt::DropoutSpec;

// Contract: OpsBackend::attention_forward (kernels/contracts/ops_backend.h), without grouped-query heads. Scratch: one
// sample's [n_head, T, T] (BF16: plus its fp32 scores).
void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout = {});

// Contract: OpsBackend::attention_backward. Scratch: one sample's fp32 [n_head, T, T] (BF16: plus a bf16 one; with
// dropout one more).
void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout = {});

}  // namespace zt::cuda
