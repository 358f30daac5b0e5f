// One Llama decoder layer, forward and backward, as a sequence of kernel calls (kernels/ops.h):
//   h = x + o_proj(attention(rope(qkv_proj(rmsnorm_1(x)))));  out = h + down_proj(swiglu(gate_up_proj(rmsnorm_2(h))))
// with grouped-query attention (materialised probabilities; the CPU's GQA kernel for now).
#pragma once

#include "engine/core/buffer.h"
#include "kernels/exec_context.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

// The layer's sizes for micro-batches of B x T, activations of dtype `act`.
struct LayerDims {
  std::int64_t B, T, C, NH, NKV, hs, I;
  DType act = DType::kF32;
  std::int64_t BT() const { return B * T; }
  std::int64_t qkv_width() const { return (NH + 2 * NKV) * hs; }
};
LayerDims layer_dims(const LlamaConfig& c, std::int64_t B, std::int64_t T, DType act = DType::kF32);

// What the forward keeps for the backward, carved from one tracked allocation.
struct LayerActivations {
  Buffer storage;
  TensorView rstd1, rstd2;  // [B, T] F32
  TensorView ln1;           // [B, T, C]
  TensorView qkv;           // [B, T, (NH + 2 NKV) hs], q and k rotated
  TensorView att;           // [B, NH, T, T]
  TensorView atty;          // [B, T, C] attention output (heads concatenated)
  TensorView resid2;        // [B, T, C] x + attention branch
  TensorView ln2;           // [B, T, C]
  TensorView gate_up;       // [B, T, 2 I]
  TensorView swiglu;        // [B, T, I]

  LayerActivations(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx);
  static std::int64_t bytes(const LayerDims& d);
};

// Gradient scratch shared by the layers' backward (workspace): [B, T, max(C, I, W, 2 I)] twice.
struct LayerGradScratch {
  Buffer a, b;
  LayerGradScratch(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx);
};

// Fills `acts` from x [B, T, C] and writes the layer output to out.
void layer_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, TensorView x,
                   LayerActivations& acts, TensorView out);
// On entry dresid holds d(out); on exit d(x). Parameter gradients are added into `grads`.
void layer_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& grads,
                    TensorView x, const LayerActivations& acts, TensorView dresid, LayerGradScratch& scratch);

}  // namespace zt::llama
