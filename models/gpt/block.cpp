// Transformer block forward/backward over the kernels of the context's device (fp32 compute on
// activations of the run's dtype);
// attention through the flash kernels when the activations hold log-sum-exps (activation_dims).
#include "models/gpt/block.h"

#include "kernels/ops.h"

namespace zt::gpt {

using ops::WeightLayout;

BlockGradScratch::BlockGradScratch(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx)
    : d_btc(ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, d.BTC())),
      d_branch(ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, d.BTC())),
      d_qkv(ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, 3 * d.BTC())),
      d_bt4c(ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, 4 * d.BTC())) {}

namespace {

// Whether the attention half adds its residual in the output projection's epilogue (where the
// device fuses it and no dropout comes between), leaving ln_2 a plain LayerNorm; otherwise the
// residual is added in the LayerNorm after it (layernorm_residual_forward).
bool attention_residual_in_projection(const ExecContext& ctx, const BlockParams& p, const BlockActivations& a,
                                      const BlockDropout& dropout) {
  return !dropout.attn_residual.active() && ops::fuses_residual_into_matmul(ctx, a.resid2, p.attn_proj_b);
}

}  // namespace

void attention_half_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& a, int n_head,
                            const BlockDropout& dropout, const KvStep* kv) {
  ops::layernorm_forward(ctx, a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln_1_w, p.ln_1_b);
  ops::matmul_forward(ctx, kv != nullptr ? kv->new_rows() : a.qkv, a.ln1, p.c_attn_w, WeightLayout::kInOut, p.c_attn_b);
  if (kv != nullptr) {
    ops::cached_attention_forward(ctx, a.atty, kv->rows, n_head);
  } else if (a.lse.data != nullptr) {
    ops::flash_attention_forward(ctx, a.atty, a.lse, a.qkv, n_head, dropout.attn_probs);
  } else {
    ops::attention_forward(ctx, a.atty, a.att, a.qkv, n_head, dropout.attn_probs);
  }
  if (attention_residual_in_projection(ctx, p, a, dropout)) {
    ops::matmul_residual_forward(ctx, a.resid2, a.atty, p.attn_proj_w, WeightLayout::kInOut, p.attn_proj_b, x);
    return;
  }
  ops::matmul_forward(ctx, a.resid2, a.atty, p.attn_proj_w, WeightLayout::kInOut, p.attn_proj_b);
  if (dropout.attn_residual.active()) ops::dropout_forward(ctx, a.resid2, a.resid2, dropout.attn_residual);
}

void mlp_half_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& a, TensorView out,
                      const BlockDropout& dropout) {
  if (attention_residual_in_projection(ctx, p, a, dropout)) {  // a.resid2 holds x + attention already
    ops::layernorm_forward(ctx, a.ln2, a.ln2_mean, a.ln2_rstd, a.resid2, p.ln_2_w, p.ln_2_b);
  } else {
    ops::layernorm_residual_forward(ctx, a.resid2, a.ln2, a.ln2_mean, a.ln2_rstd, a.resid2, x, p.ln_2_w, p.ln_2_b);
  }
  ops::matmul_gelu_forward(ctx, a.fch_gelu, a.fch, a.ln2, p.c_fc_w, WeightLayout::kInOut, p.c_fc_b);
  if (out.data == nullptr) return;
  if (!dropout.mlp_residual.active()) {
    ops::matmul_residual_forward(ctx, out, a.fch_gelu, p.mlp_proj_w, WeightLayout::kInOut, p.mlp_proj_b, a.resid2);
    return;
  }
  ops::matmul_forward(ctx, out, a.fch_gelu, p.mlp_proj_w, WeightLayout::kInOut, p.mlp_proj_b);
  ops::dropout_forward(ctx, out, out, dropout.mlp_residual);
  ops::residual_forward(ctx, out, out, a.resid2);
}

void block_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& a, TensorView out,
                   int n_head, const BlockDropout& dropout) {
  attention_half_forward(ctx, p, x, a, n_head, dropout);
  mlp_half_forward(ctx, p, x, a, out, dropout);
}

namespace {

// d(branch output) before its residual dropout: dresid itself, or dresid through the mask into
// d_branch (dresid must stay intact: it also flows on through the residual connection).
TensorView through_dropout(const ExecContext& ctx, TensorView dresid, BlockGradScratch& s, const DropoutSpec& spec) {
  if (!spec.active()) return dresid;
  const TensorView d_branch = s.d_branch.view(dresid.shape);
  ops::dropout_backward(ctx, d_branch, dresid, spec);
  return d_branch;
}

}  // namespace

void mlp_half_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& g, const BlockActivations& a,
                       TensorView dresid, BlockGradScratch& s, const BlockDropout& dropout) {
  const TensorView d_bt4c = s.d_bt4c.view(a.fch.shape);
  const TensorView d_btc = s.d_btc.view(dresid.shape);
  if (a.recomputes_cheap_outputs) {  // selective: ln_2's and GELU's outputs again, by the forward's ops
    ops::layernorm_forward(ctx, a.ln2, a.ln2_mean, a.ln2_rstd, a.resid2, p.ln_2_w, p.ln_2_b);
    ops::gelu_forward(ctx, a.fch_gelu, a.fch);
  }
  // dresid = d(out) flows unchanged into d(resid2) through the residual.
  ops::matmul_backward_through_gelu(ctx, d_bt4c, g.mlp_proj_w, g.mlp_proj_b,
                                    through_dropout(ctx, dresid, s, dropout.mlp_residual), a.fch_gelu, p.mlp_proj_w,
                                    WeightLayout::kInOut, a.fch);
  ops::matmul_backward(ctx, d_btc, g.c_fc_w, g.c_fc_b, d_bt4c, a.ln2, p.c_fc_w, WeightLayout::kInOut);
  ops::layernorm_backward(ctx, dresid, g.ln_2_w, g.ln_2_b, d_btc, a.resid2, p.ln_2_w, a.ln2_mean, a.ln2_rstd);
}

void attention_half_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& g, TensorView x,
                             const BlockActivations& a, TensorView dresid, BlockGradScratch& s, int n_head,
                             const BlockDropout& dropout) {
  const TensorView d_btc = s.d_btc.view(x.shape);
  const TensorView d_qkv = s.d_qkv.view(a.qkv.shape);
  // Selective: ln_1's output again, by the forward's op (read by c_attn's weight gradient below).
  if (a.recomputes_cheap_outputs) ops::layernorm_forward(ctx, a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln_1_w, p.ln_1_b);
  // dresid holds d(resid2), which flows on into d(x).
  ops::matmul_backward(ctx, d_btc, g.attn_proj_w, g.attn_proj_b, through_dropout(ctx, dresid, s, dropout.attn_residual),
                       a.atty, p.attn_proj_w, WeightLayout::kInOut);
  if (a.lse.data != nullptr) {
    ops::flash_attention_backward(ctx, d_qkv, d_btc, a.atty, a.qkv, a.lse, n_head, dropout.attn_probs);
  } else {
    ops::attention_backward(ctx, d_qkv, d_btc, a.qkv, a.att, n_head, dropout.attn_probs);
  }
  ops::matmul_backward(ctx, d_btc, g.c_attn_w, g.c_attn_b, d_qkv, a.ln1, p.c_attn_w, WeightLayout::kInOut);
  ops::layernorm_backward(ctx, dresid, g.ln_1_w, g.ln_1_b, d_btc, x, p.ln_1_w, a.ln1_mean, a.ln1_rstd);
}

void block_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& g, TensorView x,
                    const BlockActivations& a, TensorView dresid, BlockGradScratch& s, int n_head,
                    const BlockDropout& dropout) {
  mlp_half_backward(ctx, p, g, a, dresid, s, dropout);
  attention_half_backward(ctx, p, g, x, a, dresid, s, n_head, dropout);
}

}  // namespace zt::gpt
