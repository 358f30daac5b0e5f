// Blockwise int8 quantization on the CPU: the reference of kernels/contracts/int8_blocks.h's rule,
// which the CUDA kernels match bit for bit.
// Contracts: OpsBackend::quantize_int8_blocks, dequantize_int8_blocks (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// packed (I32, int8_blocks::packed_words(n)) = the blockwise int8 form of src (F32 or BF16, n).
void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed);
// dst (F32 or BF16, n) = the values packed holds; `accumulate`: dst (F32) += them instead.
void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate);

}  // namespace zt::cpu
