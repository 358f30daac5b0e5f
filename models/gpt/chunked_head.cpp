// GptModel's LM head and token embedding in vocabulary chunks (train.head_chunks > 1): wte is split
// by rows across units, one per chunk (gpt_params.h), and each pass takes the chunks' units one at
// a time, so ZeRO gathers, frees and reduces the tied table a chunk at a time and the logits are
// never held whole (docs/memory.md, "The head in vocabulary chunks").
#include "kernels/ops.h"
#include "models/gpt/gpt_model.h"

namespace zt::gpt {

TensorView GptModel::acquire_wte_chunk(ParamStore& store, int chunk, Pass pass) {
  // The second fp32-copy slot: the first holds the unit used across the chunk loop (the
  // embeddings' wpe in the embedding forward, ln_f in the head).
  const TensorView unit = params_.acquire(store, wte_unit(config_, chunk), pass, 1);
  return wte_chunk_view(table_, config_, chunk, unit);
}

TensorView GptModel::wte_chunk_grad(const TensorView& unit_grad, int chunk) const {
  return wte_chunk_view(table_, config_, chunk, unit_grad);
}

void GptModel::chunked_embedding_forward(ParamStore& store, const EmbeddingParams& first, TensorView tokens) {
  const ActivationDims& d = dims_;
  // Each chunk writes the positions of its own tokens, with the whole table's bits.
  ops::embedding_forward_rows(ctx_, resid(0), tokens, first.wte, first.wpe, 0, d.Vp);
  for (int c = 1; c < d.head_chunk_count(); ++c) {
    ops::embedding_forward_rows(ctx_, resid(0), tokens, acquire_wte_chunk(store, c, Pass::kForward), first.wpe,
                                c * d.Vc, d.Vp);
    store.release_params(wte_unit(config_, c), Pass::kForward);
  }
}

void GptModel::chunked_head_forward(ParamStore& store, TensorView targets, float* logits_out) {
  const ActivationDims& d = dims_;
  HeadActivations& h = *head_acts_;
  for (int c = 0; c < d.head_chunk_count(); ++c) {
    const std::int64_t begin = c * d.Vc;
    const TensorView wte = acquire_wte_chunk(store, c, Pass::kForward);
    const std::int64_t w = wte.shape[0];
    const TensorView logits{h.probs.data, d.act, h.probs.device, Shape{d.BT(), w}};
    ops::matmul_forward(ctx_, logits, h.lnf, wte, ops::WeightLayout::kOutIn, TensorView{});
    store.release_params(wte_unit(config_, c), Pass::kForward);
    if (logits_out != nullptr) zt::copy_logits_out(ctx_, logits, begin, config_.vocab_size, logits_out);
    ops::cross_entropy_chunk_stats(ctx_, h.row_max, h.row_sum, h.target_logit, logits, targets, begin,
                                   config_.vocab_size, c == 0);
  }
  ops::cross_entropy_chunk_loss(ctx_, h.losses, h.row_max, h.row_max, h.row_sum, h.target_logit);
}

void GptModel::chunked_head_backward(ParamStore& store, TensorView dlnf, TensorView targets, float loss_scale) {
  const ActivationDims& d = dims_;
  HeadActivations& h = *head_acts_;
  const float dloss = loss_scale / static_cast<float>(d.BT());
  const int last = d.head_chunk_count() - 1;
  // The last chunk first: the forward's last unit, still gathered for it.
  for (int c = last; c >= 0; --c) {
    const int unit = wte_unit(config_, c);
    const std::int64_t begin = c * d.Vc;
    const TensorView wte = acquire_wte_chunk(store, c, Pass::kBackward);
    const TensorView logits{h.probs.data, d.act, h.probs.device, Shape{d.BT(), wte.shape[0]}};
    ops::matmul_forward(ctx_, logits, h.lnf, wte, ops::WeightLayout::kOutIn, TensorView{});  // again
    ops::cross_entropy_chunk_backward(ctx_, logits, logits, h.row_max, targets, begin, dloss, config_.vocab_size);
    // dlnf = sum over chunks of dlogits_c @ wte_c, in the activation dtype: the first chunk
    // writes it, each later one adds its part.
    const TensorView grad = grad_destination(store, unit);
    ops::matmul_backward(ctx_, c == last ? dlnf : h.dlnf_part, wte_chunk_grad(grad, c), TensorView{}, logits, h.lnf,
                         wte, ops::WeightLayout::kOutIn);
    if (c != last) ops::residual_forward(ctx_, dlnf, dlnf, h.dlnf_part);
    store.accumulate_grads(unit, grad);
    store.grads_ready(unit);  // the head's round: reduced now, not after the blocks
    store.release_params(unit, Pass::kBackward);
  }
}

void GptModel::chunked_embedding_backward(ParamStore& store, TensorView dresid, TensorView tokens) {
  const ActivationDims& d = dims_;
  // A scatter-add of dresid into each chunk's rows (the second round of each chunk's gradient,
  // through the fp32 scratch); wpe's with chunk 0, whose unit holds it.
  for (int c = 0; c < d.head_chunk_count(); ++c) {
    const int unit = wte_unit(config_, c);
    const TensorView grad = zeroed_grad_scratch(unit);
    const TensorView wpe_grad = c == 0 ? embedding_views(table_, grad).wpe : TensorView{};
    ops::embedding_backward_rows(ctx_, wte_chunk_grad(grad, c), wpe_grad, dresid, tokens, c * d.Vc, d.Vp);
    store.accumulate_grads(unit, grad);
    store.grads_ready(unit);
  }
}

}  // namespace zt::gpt
