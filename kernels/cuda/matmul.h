// CUDA twin of kernels/cpu/matmul.h: the linear layer through cuBLASLt, in fp32 (FP32 compute, or
// as KernelResources::fp32_matmuls says: TF32 inputs, or inputs rounded to bf16 in scratch) and
// with bf16 activations (bf16 tensor-core products, fp32 accumulate). Bias and GELU are folded
// into cuBLASLt epilogues: bias + GELU in the forward, GELU's derivative in the backward.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/weight_layout.h"  // WeightLayout: one definition for both backends
#include "kernels/exec_context.h"

namespace zt::cuda {

using zt::WeightLayout;

// out[N, OC] = inp[N, C] @ W + bias[OC] (bias may be empty). The activation operands out and inp
// share one dtype (docs/precision.md), F32 or BF16; a mix fails a check naming the op. The weight is
// F32 (with BF16 activations rounded to bf16 for the tensor cores, as the CPU reference does), or
// BF16 with BF16 activations. The bias is F32, added in fp32 before the result's one rounding to
// bf16 (through fp32 scratch: [Note: fp32 bias with bf16 results] in matmul.cu), or BF16 alongside
// BF16 activations (cuBLASLt's own bf16 bias epilogue). With a non-empty gelu_pre (shaped and typed
// as out), the epilogue also applies GELU: gelu_pre = inp @ W + bias (what gelu_backward needs),
// out = gelu(gelu_pre).
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias, TensorView gelu_pre = {});

// out = residual + inp @ W + bias (residual shaped and typed as out; it may be out itself): the
// residual added in cuBLASLt's epilogue (beta 1), so the sum is rounded once and the separate
// residual add's pass over memory goes; where the epilogue cannot take it (an F32 bias with BF16
// activations, or no algorithm offered) matmul_forward then residual_forward.
void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                             WeightLayout layout, TensorView bias, TensorView residual);

// Contract: OpsBackend::matmul_backward (kernels/contracts/ops_backend.h); dweight and dbias F32 or the inputs' dtype
// (dbias by the deterministic two-stage sum, or where the bias-gradient route allows, cuBLASLt's BGRAD epilogue into
// scratch and then added: [Note: the bias gradient in the weight product] in bias_grad.cu).
// dinp, dout and inp share one dtype; with BF16 ones dinp = round(dout @ W_bf16^T) and dweight sums
// the bf16 products in fp32. With a non-empty gelu_pre (shaped and typed as dinp), dinp = (dout @
// W^T) * gelu'(gelu_pre): the backward through the GELU whose output was this layer's inp, fused
// into the epilogue.
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout, TensorView gelu_pre = {});

}  // namespace zt::cuda
