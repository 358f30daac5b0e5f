// The operand checks the CPU kernels and their CUDA twins share, one definition each, so both
// backends accept exactly the same shapes and dtypes.
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/rope_angles.h"

namespace zt {

// The operand shapes every attention kernel (CPU and CUDA) takes, checked: qkv [B, T, 3C] with C a
// multiple of n_head, att [B, n_head, T, T], out/dout [B, T, C], of one activation dtype (F32 or BF16).
struct AttentionDims {
  std::int64_t B, T, C, NH, hs;
  // Grouped-query attention: NKV key/value heads (NH a multiple of it), query head h reading kv
  // head h / (NH / NKV). A qkv row is W = (NH + 2 NKV) hs wide: q | k | v, k at column k_off =
  // NH hs and v at v_off = (NH + NKV) hs. With NKV = NH (multi-head) W = 3C.
  std::int64_t NKV, W, k_off, v_off;
};
// n_kv_head 0: n_head (multi-head attention, qkv [B, T, 3C]).
AttentionDims attention_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head,
                             int n_kv_head = 0);
// The same for the fused kernels, which keep no probabilities (flash, cuDNN): no att.
AttentionDims fused_attention_dims(const TensorView& out_like, const TensorView& qkv, int n_head, int n_kv_head = 0);
// The operands of attention over a key/value cache (OpsBackend::cached_attention_forward), checked:
// cache [B, P, W] qkv rows of positions 0..P-1 (W as AttentionDims'), out [B, Tq, C] for the last
// Tq of them (0 < Tq <= P), one activation dtype. T is P, the positions attended to.
struct CachedAttentionDims : AttentionDims {
  std::int64_t Tq;     // the new positions, the cache's last Tq rows
  std::int64_t first;  // P - Tq: the first new position
};
CachedAttentionDims cached_attention_dims(const TensorView& out, const TensorView& cache, int n_head,
                                          int n_kv_head = 0);
// Whether the flash kernels (kernels/cuda/flash_attention.h) are built for these shapes: head sizes
// 8-128, powers of 2 (registers hold a row), and batch * n_head within the grid's y dimension. A
// pure rule, so a build without CUDA (the config check) asks it too.
bool flash_attention_shape_supported(std::int64_t batch, std::int64_t n_head, std::int64_t head_size);
// The head sizes the tensor-core flash kernels (bf16) are compiled for: 16, 32, 64 and 128. Whether
// the device grants their shared memory is the CUDA backend's to say; sm_90 grants it at each.
bool flash_attention_tc_head_size(std::int64_t head_size);

// Why cuDNN's fused attention (kernels/cuda/cudnn_attention.h) does not take operands of this kind,
// or "": bf16 activations, a head size that is a multiple of 8 up to 128, no dropout on the
// probabilities. The rule alone, not whether cuDNN loads: a build without CUDA predicting a GPU
// run's memory takes cuDNN where a GPU machine with it would (it predicted the materialised
// scores, 11.4 GB of activations for GPT-2 124M's 6.5).
std::string cudnn_attention_shape_refuses(DType activations, std::int64_t head_size, bool dropout);

// The operands every embedding kernel (CPU and CUDA) takes, checked: tokens I32 [B, T],
// wte [vocab, C], wpe [max_T, C] with T <= max_T, out/dout [B, T, C] F32 or BF16. The tables are the
// forward's parameters (F32, or both BF16 with a BF16 out: check_param_dtype, naming
// embedding_forward) or the backward's gradients (F32).
struct EmbeddingDims {
  std::int64_t B, T, C, vocab, max_T;
};
enum class EmbeddingTables { kParameters, kGradients };
EmbeddingDims embedding_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                             const TensorView& wpe, EmbeddingTables tables);

// The operands both RoPE backends take, checked: x [B, T, W] whose first n_heads heads of
// head_size (even) columns fit a row, theta > 0, a scaling factor >= 1 and llama3's frequency
// factors increasing.
struct RopeDims {
  std::int64_t B, T, W;
};
RopeDims rope_dims(const TensorView& x, int n_heads, int head_size, const RopeFrequencies& freq);

}  // namespace zt
