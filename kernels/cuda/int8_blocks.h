// CUDA twin of kernels/cpu/int8_blocks.h: blockwise int8 quantization for quantized collectives,
// bit-identical to the CPU's (the rule: kernels/contracts/int8_blocks.h).
// Contracts: OpsBackend::quantize_int8_blocks, dequantize_int8_blocks (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed);
void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate);

}  // namespace zt::cuda
