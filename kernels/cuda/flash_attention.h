// Flash-style causal attention on the GPU, computing in fp32 on F32 or BF16 activations: the same
// result as kernels/cuda/attention.h (and the CPU's) without ever materialising the
// [B, n_head, T, T] probabilities. The forward streams
// key/value tiles through shared memory with an online softmax and keeps one log-sum-exp per query
// row; the backward recomputes the probabilities from it (FlashAttention-2's split: one pass for
// dq per query row, one for dk and dv per key row). Dropout on the probabilities is fused: the
// CPU's mask (kernels/contracts/dropout_spec.h, element (h, i, j) of a sample's [n_head, T, T]) regenerated
// where each probability is used. Deterministic: no atomics. BF16 activations at head sizes 16-128
// run on tensor cores ([Note: flash attention on tensor cores] in flash_attention_tc_common.cuh), F32 and
// the other head sizes on CUDA cores. The model's attention on CUDA where the shapes allow
// (gpt::activation_dims); tools/bench_kernels times it beside the cuBLASLt path.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"  // DropoutSpec
#include "kernels/exec_context.h"

namespace zt::cuda {

using zt::DropoutSpec;

// Whether the kernels serve these shapes: a head size they are compiled for (registers hold a row
// of q and the output: 8-128, powers of 2) and batch * n_head within the grid's y dimension.
bool flash_attention_supports(std::int64_t batch, std::int64_t n_head, std::int64_t hs);

// Whether 16-byte aligned operands of this dtype and head size take the tensor-core kernels on the
// current device (BF16, hs 16, 32, 64 or 128 where the device grants their shared memory); other
// operands take the CUDA-core kernels. The tests use it to know which rounding to expect.
bool flash_attention_tensor_cores(DType activations, std::int64_t hs);

// qkv [B, T, 3C] (q | k | v, head h in columns [h*hs, (h+1)*hs)), out [B, T, C], lse [B, n_head, T]:
// out = softmax(q k^T / sqrt(hs), causal) v per head, lse = the log of each row's softmax sum
// (after subtracting nothing: log sum_j exp(s_ij)), which the backward needs. qkv and out share one
// dtype, F32 or BF16 (a mix fails naming the op); lse is F32 either way. An active `dropout` drops
// probabilities as cuda::attention_forward does (lse stays that of the undropped softmax).
// Grouped-query attention: n_kv_head key/value heads (0: n_head), qkv [B, T, (n_head + 2
// n_kv_head) hs], query head h reading key/value head h / (n_head / n_kv_head), as the CPU's
// attention (kernels/contracts/operand_checks.h).
void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout = {}, int n_kv_head = 0);

// dqkv (overwritten, shaped as qkv) from dout [B, T, C] and the forward's out, qkv and lse; dqkv,
// dout, out and qkv share one dtype; `dropout` and n_kv_head as given to the forward. A key/value
// head's dk and dv sum its query heads' terms in head order (no atomics: deterministic).
void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout = {}, int n_kv_head = 0);

}  // namespace zt::cuda
