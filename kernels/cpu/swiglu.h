// SwiGLU (Llama's MLP activation), forward and backward, computed in fp32, on the output of the
// fused gate and up projections: gate_up [N, 2H] holds each row's gate in columns [0, H) and its up
// in [H, 2H) (one matmul with the two weights stacked), out [N, H] = silu(gate) * up, where
// silu(g) = g * sigmoid(g).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[N, H] = silu(gate_up[:, :H]) * gate_up[:, H:]. F32 or BF16 activations (each output
// rounded once).
void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up);

// dgate_up[:, :H] = dout * up * silu'(gate), dgate_up[:, H:] = dout * silu(gate) (overwritten),
// with silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))). dgate_up may alias gate_up.
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout);

}  // namespace zt::cpu
