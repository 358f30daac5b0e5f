// Internal to the CUDA kernels: the linear layer's bias gradient, dbias += the column sums of
// dout [rows, OC], for matmul_backward (matmul.cu).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/cuda/lt_gemm.h"
#include "kernels/exec_context.h"

namespace zt::cuda::detail {

// dbias += the column sums of dout [rows, OC] by the two-stage kernels (matmul_kernels.cuh: a
// fixed order, fp32 sums added once into dbias, F32 or BF16).
void bias_grad_kernels(const ExecContext& ctx, TensorView dbias, TensorView dout, std::int64_t rows, int OC);

// The weight-gradient product `dw` (built by matmul_backward: beta 1, dout one of its operands,
// A where `dout_is_a`, else B) and, where dbias has data, dbias += the column sums of dout: by
// bias_grad_kernels, or by cuBLASLt's bias-gradient epilogue on `dw` where
// KernelResources::bias_grad_route allows it ([Note: the bias gradient in the weight product]).
// `dout_operand_is_dout`: dw reads dout itself, not a bf16 copy of it, so the epilogue sums the
// same values as the kernels. A BF16 dbias must hold zero where the epilogue may run: its sums are
// rounded to bf16 before they are added, which only a zero leaves unchanged (so it is:
// ParamStore::in_place_grads lends gradient storage only while it holds zero, and otherwise dbias
// is zeroed fp32 scratch).
void weight_and_bias_grad(const ExecContext& ctx, const LtGemm& dw, bool dout_is_a, bool dout_operand_is_dout,
                          TensorView dbias, TensorView dout, std::int64_t rows, int OC);

}  // namespace zt::cuda::detail
