// One Llama decoder layer, forward and backward, as a sequence of kernel calls (kernels/ops.h):
//   h = x + o_proj(attention(rope(qkv_proj(rmsnorm_1(x)))));  out = h + down_proj(swiglu(gate_up_proj(rmsnorm_2(h))))
// with grouped-query attention: materialised probabilities on the CPU, the flash kernels on CUDA
// where they serve the shape (no T x T probabilities kept; ops::flash_attention_available).
#pragma once

#include "engine/base/core/buffer.h"
#include "kernels/exec_context.h"
#include "models/kv_cache.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

// The layer's sizes for micro-batches of B x T, activations of dtype `act`, and which attention
// runs: flash (a log-sum-exp per query row kept) or materialised ([B, NH, T, T] probabilities).
struct LayerDims {
  std::int64_t B, T, C, NH, NKV, hs, I;
  DType act = DType::kF32;
  bool flash_attention = false;
  // Selective activation checkpointing: a layer keeps neither norm's output nor SwiGLU's; they
  // live in the model's LayerRecomputeScratch, and backward recomputes them there.
  bool selective = false;
  std::int64_t BT() const { return B * T; }
  std::int64_t qkv_width() const { return (NH + 2 * NKV) * hs; }
};
// On `device`: flash attention on CUDA where its kernels serve (B, n_head, head size), as GPT's
// activation_dims chooses.
LayerDims layer_dims(const LlamaConfig& c, std::int64_t B, std::int64_t T, DType act = DType::kF32,
                     Device device = Device::kCPU, bool selective = false);

// Selective checkpointing's home for what a layer does not keep: ln [B, T, C] (the input norm's
// output, then the post-attention norm's) and swiglu [B, T, I], one of each for the model
// (workspace: a BT (C + I)). Backward recomputes them with the forward's ops: the same bits.
struct LayerRecomputeScratch {
  Buffer storage;
  TensorView ln, swiglu;
  LayerRecomputeScratch(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx);
  static std::int64_t bytes(const LayerDims& d);
};

// What the forward keeps for the backward, carved from one tracked allocation.
struct LayerActivations {
  Buffer storage;
  TensorView rstd1, rstd2;  // [B, T] F32
  TensorView ln1;           // [B, T, C]
  TensorView qkv;           // [B, T, (NH + 2 NKV) hs], q and k rotated
  TensorView att;           // [B, NH, T, T] materialised probabilities; empty with flash attention
  TensorView lse;           // [B, NH, T] F32 log-sum-exp per query row, flash attention only
  TensorView atty;          // [B, T, C] attention output (heads concatenated)
  TensorView resid2;        // [B, T, C] x + attention branch
  TensorView ln2;           // [B, T, C]
  TensorView gate_up;       // [B, T, 2 I]
  TensorView swiglu;        // [B, T, I]
  // Selective: ln1 and ln2 view the scratch's ln, swiglu its swiglu; backward recomputes them.
  bool recomputes_cheap_outputs = false;

  // `scratch`: the model's, used when d.selective.
  LayerActivations(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx,
                   const LayerRecomputeScratch* scratch = nullptr);
  static std::int64_t bytes(const LayerDims& d);
};

// Gradient scratch shared by the layers' backward (workspace): [B, T, max(C, I, W, 2 I)] twice.
struct LayerGradScratch {
  Buffer a, b;
  LayerGradScratch(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx);
  LayerGradScratch() = default;  // none: a model built for forwards only
};

// Fills `acts` from x [B, T, C] and writes the layer output to out.
void layer_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, TensorView x,
                   LayerActivations& acts, TensorView out);
// The same in halves, for a layer whose attention and MLP parameters are separate units
// (train.block_units = 2): the attention half leaves x + its output in acts.resid2, the MLP half
// goes on from there to out. layer_forward is the two in turn. Decoding (`kv`): the projection
// writes the cache's new rows, RoPE turns them at their positions, and the attention reads every
// position so far from the cache.
void attention_half_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, TensorView x,
                            LayerActivations& acts, const KvStep* kv = nullptr);
void mlp_half_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, LayerActivations& acts,
                      TensorView out);
// On entry dresid holds d(out); on exit d(x). Parameter gradients are added into `grads`.
void layer_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& grads,
                    TensorView x, const LayerActivations& acts, TensorView dresid, LayerGradScratch& scratch);
// In halves: the MLP half takes dresid from d(out) to d(resid2), the attention half from there to
// d(x). layer_backward is the two in turn.
void mlp_half_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& grads,
                       const LayerActivations& acts, TensorView dresid, LayerGradScratch& scratch);
void attention_half_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p,
                             const LayerParams& grads, TensorView x, const LayerActivations& acts, TensorView dresid,
                             LayerGradScratch& scratch);

}  // namespace zt::llama
