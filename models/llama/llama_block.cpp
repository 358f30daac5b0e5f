// The Llama decoder layer over the kernels (see the header).
#include "models/llama/llama_block.h"

#include <algorithm>

#include "kernels/ops.h"

namespace zt::llama {

using ops::WeightLayout;

LayerDims layer_dims(const LlamaConfig& c, std::int64_t B, std::int64_t T, DType act, Device device, bool selective) {
  const bool flash = ops::flash_attention_available(device, B, c.n_head, c.head_size());
  return {B, T, c.n_embd, c.n_head, c.n_kv_head, c.head_size(), c.hidden(), act, flash, selective};
}

std::int64_t LayerRecomputeScratch::bytes(const LayerDims& d) {
  return d.selective ? static_cast<std::int64_t>(dtype_size_bytes(d.act)) * d.BT() * (d.C + d.I) : 0;
}

LayerRecomputeScratch::LayerRecomputeScratch(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx) {
  if (!d.selective) return;
  storage = ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act,
                          bytes(d) / static_cast<std::int64_t>(dtype_size_bytes(d.act)), false);
  ln = TensorView{storage.data(), d.act, storage.device(), Shape{d.B, d.T, d.C}};
  swiglu =
      TensorView{static_cast<char*>(storage.data()) + ln.size_bytes(), d.act, storage.device(), Shape{d.B, d.T, d.I}};
}

std::int64_t LayerActivations::bytes(const LayerDims& d) {
  const std::int64_t a = static_cast<std::int64_t>(dtype_size_bytes(d.act));
  const std::int64_t attention = d.flash_attention ? 4 * d.B * d.NH * d.T : a * d.B * d.NH * d.T * d.T;
  // Selective: no ln1, ln2 (2 C) or swiglu (I).
  const std::int64_t kept = d.selective ? 2 * d.C + d.qkv_width() + 2 * d.I : 4 * d.C + d.qkv_width() + 3 * d.I;
  return 4 * 2 * d.BT() + attention + a * d.BT() * kept;
}

LayerActivations::LayerActivations(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx,
                                   const LayerRecomputeScratch* scratch)
    : storage(ops::allocate(ctx, tracker, MemCategory::kActivations, d.act,
                            bytes(d) / static_cast<std::int64_t>(dtype_size_bytes(d.act)), false)),
      recomputes_cheap_outputs(d.selective) {
  ZT_CHECK(!d.selective || (scratch != nullptr && scratch->ln.data != nullptr), "selective without a scratch");
  char* base = static_cast<char*>(storage.data());
  std::int64_t used = 0;
  auto take = [&](DType dt, Shape s) {
    TensorView v{base + used, dt, storage.device(), s};
    used += static_cast<std::int64_t>(v.size_bytes());
    return v;
  };
  rstd1 = take(DType::kF32, {d.B, d.T});
  rstd2 = take(DType::kF32, {d.B, d.T});
  if (d.flash_attention) lse = take(DType::kF32, {d.B, d.NH, d.T});
  ln1 = d.selective ? scratch->ln : take(d.act, {d.B, d.T, d.C});
  qkv = take(d.act, {d.B, d.T, d.qkv_width()});
  if (!d.flash_attention) att = take(d.act, {d.B, d.NH, d.T, d.T});
  atty = take(d.act, {d.B, d.T, d.C});
  resid2 = take(d.act, {d.B, d.T, d.C});
  ln2 = d.selective ? scratch->ln : take(d.act, {d.B, d.T, d.C});
  gate_up = take(d.act, {d.B, d.T, 2 * d.I});
  swiglu = d.selective ? scratch->swiglu : take(d.act, {d.B, d.T, d.I});
  ZT_CHECK(used == static_cast<std::int64_t>(storage.size_bytes()), "carved {} of {} bytes", used,
           storage.size_bytes());
}

LayerGradScratch::LayerGradScratch(MemoryTracker& tracker, const LayerDims& d, const ExecContext& ctx) {
  const std::int64_t width = std::max({d.C, d.qkv_width(), 2 * d.I});
  a = ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, d.BT() * width);
  b = ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, d.BT() * width);
}

void attention_half_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, TensorView x,
                            LayerActivations& a, const KvStep* kv) {
  ops::rmsnorm_forward(ctx, a.ln1, a.rstd1, x, p.input_norm, c.norm_eps);
  const TensorView qkv = kv != nullptr ? kv->new_rows() : a.qkv;
  ops::matmul_forward(ctx, qkv, a.ln1, p.qkv_proj, WeightLayout::kOutIn, TensorView{});
  // q and k heads, at their positions
  ops::rope_forward(ctx, qkv, c.n_head + c.n_kv_head, c.head_size(), c.rope(), kv != nullptr ? kv->position : 0);
  if (kv != nullptr) {
    ops::cached_attention_forward(ctx, a.atty, kv->rows, c.n_head, c.n_kv_head);
  } else if (a.lse.data != nullptr) {
    ops::flash_attention_forward(ctx, a.atty, a.lse, a.qkv, c.n_head, DropoutSpec{}, c.n_kv_head);
  } else {
    ops::attention_forward(ctx, a.atty, a.att, a.qkv, c.n_head, DropoutSpec{}, c.n_kv_head);
  }
  ops::matmul_residual_forward(ctx, a.resid2, a.atty, p.o_proj, WeightLayout::kOutIn, TensorView{}, x);
}

void mlp_half_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, LayerActivations& a,
                      TensorView out) {
  ops::rmsnorm_forward(ctx, a.ln2, a.rstd2, a.resid2, p.post_norm, c.norm_eps);
  ops::matmul_forward(ctx, a.gate_up, a.ln2, p.gate_up_proj, WeightLayout::kOutIn, TensorView{});
  ops::swiglu_forward(ctx, a.swiglu, a.gate_up);
  ops::matmul_residual_forward(ctx, out, a.swiglu, p.down_proj, WeightLayout::kOutIn, TensorView{}, a.resid2);
}

void layer_forward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, TensorView x,
                   LayerActivations& acts, TensorView out) {
  attention_half_forward(ctx, c, p, x, acts);
  mlp_half_forward(ctx, c, p, acts, out);
}

namespace {

// Scratch buffer `buf` as [B, T, width].
TensorView scratch_view(Buffer& buf, const LayerActivations& a, std::int64_t width) {
  TensorView v = buf.view();
  v.shape = Shape{a.ln1.shape[0], a.ln1.shape[1], width};
  return v;
}

}  // namespace

void mlp_half_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& g,
                       const LayerActivations& a, TensorView dresid, LayerGradScratch& s) {
  if (a.recomputes_cheap_outputs) {  // selective: the norm's and SwiGLU's outputs again, by the forward's ops
    ops::rmsnorm_forward(ctx, a.ln2, a.rstd2, a.resid2, p.post_norm, c.norm_eps);
    ops::swiglu_forward(ctx, a.swiglu, a.gate_up);
  }
  // dresid = d(out) flows unchanged into d(resid2) through the residual.
  const std::int64_t C = a.ln2.shape[2], I = a.swiglu.shape[2];
  const TensorView dh = scratch_view(s.a, a, I), dgu = scratch_view(s.b, a, 2 * I);
  ops::matmul_backward(ctx, dh, g.down_proj, TensorView{}, dresid, a.swiglu, p.down_proj, WeightLayout::kOutIn);
  ops::swiglu_backward(ctx, dgu, a.gate_up, dh);
  const TensorView dln2 = scratch_view(s.a, a, C);
  ops::matmul_backward(ctx, dln2, g.gate_up_proj, TensorView{}, dgu, a.ln2, p.gate_up_proj, WeightLayout::kOutIn);
  ops::rmsnorm_backward(ctx, dresid, g.post_norm, dln2, a.resid2, p.post_norm, a.rstd2);
}

void attention_half_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& g,
                             TensorView x, const LayerActivations& a, TensorView dresid, LayerGradScratch& s) {
  // Selective: the input norm's output again, by the forward's op (read by qkv_proj's weight gradient).
  if (a.recomputes_cheap_outputs) ops::rmsnorm_forward(ctx, a.ln1, a.rstd1, x, p.input_norm, c.norm_eps);
  // dresid holds d(resid2), which flows on into d(x).
  const std::int64_t C = a.ln1.shape[2], W = a.qkv.shape[2];
  const TensorView datty = scratch_view(s.a, a, C), dqkv = scratch_view(s.b, a, W);
  ops::matmul_backward(ctx, datty, g.o_proj, TensorView{}, dresid, a.atty, p.o_proj, WeightLayout::kOutIn);
  if (a.lse.data != nullptr) {
    ops::flash_attention_backward(ctx, dqkv, datty, a.atty, a.qkv, a.lse, c.n_head, DropoutSpec{}, c.n_kv_head);
  } else {
    ops::attention_backward(ctx, dqkv, datty, a.qkv, a.att, c.n_head, DropoutSpec{}, c.n_kv_head);
  }
  ops::rope_backward(ctx, dqkv, c.n_head + c.n_kv_head, c.head_size(), c.rope());
  const TensorView dln1 = scratch_view(s.a, a, C);
  ops::matmul_backward(ctx, dln1, g.qkv_proj, TensorView{}, dqkv, a.ln1, p.qkv_proj, WeightLayout::kOutIn);
  ops::rmsnorm_backward(ctx, dresid, g.input_norm, dln1, x, p.input_norm, a.rstd1);
}

void layer_backward(const ExecContext& ctx, const LlamaConfig& c, const LayerParams& p, const LayerParams& g,
                    TensorView x, const LayerActivations& a, TensorView dresid, LayerGradScratch& s) {
  mlp_half_backward(ctx, c, p, g, a, dresid, s);
  attention_half_backward(ctx, c, p, g, x, a, dresid, s);
}

}  // namespace zt::llama
