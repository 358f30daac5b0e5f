// CUDA twin of kernels/cpu/cross_entropy.h: fused softmax + cross-entropy over a padded
// vocabulary, computed in fp32. Only the first vocab_size of the Vp columns enter the softmax. Each
// op's logits/probs/dlogits are all F32 or all BF16 (docs/precision.md); losses are always F32.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// Contracts: OpsBackend::softmax_cross_entropy_* (kernels/contracts/ops_backend.h). Targets on the GPU are not
// range-checked on the host (that needs a sync): a target outside [0, vocab_size) gives a NaN loss
// for its row.
void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size);

void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size);

// Where the forward kernels keep a row between their passes: nowhere, reading it from memory again
// (kReread, the default), or in shared memory where it fits with two blocks on an SM
// (kSharedMemory: the benchmark and the tests run it beside kReread). The same bits either way
// ([Note: the row in shared memory]). Measured on the H200 at d650922, bf16 [8192, 50304]: 0.916 ms
// re-read against 1.074 ms in shared memory (docs/results/gpu_session_2026-11-28_h200), so the
// models re-read.
enum class CeRowCache { kReread, kSharedMemory };

// Forward and backward in one pass over the logits, never storing the probabilities (in place in
// the logits as llm.c does). Equal to the forward then the backward above, which the tests check.
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size,
                                 CeRowCache cache = CeRowCache::kReread);

}  // namespace zt::cuda
