// One pre-LN transformer block, forward and backward, as a sequence of kernel calls (kernels/ops.h):
//   resid2 = x + attn_proj(attention(c_attn(ln_1(x))));  out = resid2 + mlp_proj(gelu(c_fc(ln_2(resid2)))).
#pragma once

#include "engine/base/core/buffer.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/exec_context.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_params.h"
#include "models/kv_cache.h"

namespace zt::gpt {

// The block's three dropout sites for this micro-batch (inactive specs when dropout is off).
struct BlockDropout {
  DropoutSpec attn_probs, attn_residual, mlp_residual;
};

// Activation-gradient scratch shared by all blocks' backward (workspace category).
struct BlockGradScratch {
  Buffer d_btc;     // [B,T,C]: d(ln_2 out), then d(attention out), then d(ln_1 out)
  Buffer d_branch;  // [B,T,C]: d(projection output) through a residual dropout mask
  Buffer d_qkv;     // [B,T,3C]
  Buffer d_bt4c;    // [B,T,4C]: d(gelu out), then d(c_fc out) in place

  BlockGradScratch(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx);
  BlockGradScratch() = default;  // none: a model built for forwards only
};

// Fills `acts` from input x [B,T,C]. When `out` is non-empty it receives the block output; a
// recompute for activation checkpointing passes an empty `out`, since the output is already kept.
void block_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& acts, TensorView out,
                   int n_head, const BlockDropout& dropout);

// The same in halves, for a block whose attention and MLP parameters are separate units
// (train.block_units = 2): the attention half leaves x + the projection's output in acts.resid2
// where the device adds the residual in the projection (ops::fuses_residual_into_matmul) and no
// residual dropout comes between, else the projection's output, to which the MLP half then adds x
// (with ln_2, fused); the MLP half goes on from there. block_forward is the two in turn.
// Decoding (`kv`, no dropout, nothing kept for a backward): the projection writes the cache's new
// rows, and the attention reads every position so far from the cache.
void attention_half_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& acts,
                            int n_head, const BlockDropout& dropout, const KvStep* kv = nullptr);
void mlp_half_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& acts,
                      TensorView out, const BlockDropout& dropout);

// On entry dresid holds d(out); on exit d(x). Parameter gradients are added into `grads`.
// `dropout` must be the forward's (masks are regenerated, not stored).
void block_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& grads, TensorView x,
                    const BlockActivations& acts, TensorView dresid, BlockGradScratch& scratch, int n_head,
                    const BlockDropout& dropout);
// In halves: the MLP half takes dresid from d(out) to d(resid2), the attention half from there to
// d(x). block_backward is the two in turn.
void mlp_half_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& grads,
                       const BlockActivations& acts, TensorView dresid, BlockGradScratch& scratch,
                       const BlockDropout& dropout);
void attention_half_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& grads, TensorView x,
                             const BlockActivations& acts, TensorView dresid, BlockGradScratch& scratch, int n_head,
                             const BlockDropout& dropout);

}  // namespace zt::gpt
