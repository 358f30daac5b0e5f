// CUDA twin of kernels/cpu/matmul.h: the linear layer through cuBLASLt, in fp32 (FP32 compute, or
// as KernelResources::fp32_matmuls says: TF32 inputs, or inputs rounded to bf16 in scratch) and in
// bf16 (fp32 accumulate). Bias and GELU are folded
// into cuBLASLt epilogues: bias + GELU in the forward, GELU's derivative in the backward.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/cpu/matmul.h"  // WeightLayout: one definition for both backends
#include "kernels/exec_context.h"

namespace zt::cuda {

using cpu::WeightLayout;

// out[N, OC] = inp[N, C] @ W + bias[OC] (bias may be empty). inp, weight, out and bias share one
// dtype, F32 or BF16. With a non-empty gelu_pre (shaped and typed as out), the epilogue also
// applies GELU: gelu_pre = inp @ W + bias (what gelu_backward needs), out = gelu(gelu_pre).
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias, TensorView gelu_pre = {});

// As cpu::matmul_backward: dinp = dout @ W^T (overwritten; skipped when empty), dweight += inp^T @
// dout in the weight's layout (F32 or the inputs' dtype), dbias[OC] += column sums of dout (F32;
// a deterministic two-stage sum, not cuBLASLt's BGRAD epilogue, which overwrites instead of adding).
// With a non-empty gelu_pre (shaped and typed as dinp), dinp = (dout @ W^T) * gelu'(gelu_pre): the
// backward through the GELU whose output was this layer's inp, fused into the epilogue.
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout, TensorView gelu_pre = {});

}  // namespace zt::cuda
