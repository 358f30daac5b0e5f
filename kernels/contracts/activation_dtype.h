// The one check of an op's activation operands (docs/precision.md): they share one dtype, F32 or
// BF16. Shared by the CPU kernels and their CUDA twins (C++17, so nvcc can include it).
#pragma once

#include <initializer_list>

#include "engine/base/core/tensor.h"

namespace zt {

// The dtype an op's activation operands share (F32 or BF16), ignoring views without data (omitted
// optional operands); a mix of the two, or any other dtype, is an InternalError naming `op`.
DType activation_dtype(const char* op, std::initializer_list<TensorView> operands);

// The check of an op's parameter operands (weights, biases, embedding tables; not their gradients,
// which are F32): F32, or BF16 when the op's activations are BF16, so bf16 working weights reach the
// kernels as they are stored (docs/precision.md). Views without data are ignored; anything else is
// an InternalError naming `op`.
void check_param_dtype(const char* op, DType activations, std::initializer_list<TensorView> params);

}  // namespace zt
