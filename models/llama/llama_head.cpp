// LlamaModel's token embedding and LM head, whole or in vocabulary chunks (train.head_chunks > 1):
// each chunk's rows of the head's table are a unit of their own (llama_params.h). The loops over the
// chunks are every family's (models/vocab_chunk_passes.h: the online softmax's statistics over the
// chunks in the forward, each chunk's logits again in the backward for its dlogits, its share of dlnf
// and its rows' gradient, reduced at once; a tied table's embedding gradient as a second round at the
// end); here a Llama says where its chunks are (VocabChunks).
#include "kernels/ops.h"
#include "models/llama/llama_model.h"
#include "models/unit_scope.h"

namespace zt::llama {

using ops::WeightLayout;

LlamaModel::HeadViews LlamaModel::head_views() const {
  const LayerDims& d = dims_;
  char* p = static_cast<char*>(head_.data());
  const Device dev = head_.device();
  const std::int64_t a = static_cast<std::int64_t>(dtype_size_bytes(d.act)), BT = d.BT(), BTC = BT * d.C;
  auto stat = [&](int i) { return TensorView{p + 4 * i * BT, DType::kF32, dev, Shape{BT}}; };
  HeadViews h;
  h.rstd = stat(0);
  h.rstd.shape = Shape{d.B, d.T};
  h.losses = stat(1);
  const int stats = head_chunked() ? 5 : 2;
  if (head_chunked()) h.row_max = stat(2), h.row_sum = stat(3), h.target_logit = stat(4);
  char* act = p + 4 * stats * BT;
  h.lnf = TensorView{act, d.act, dev, Shape{d.B, d.T, d.C}};
  h.logits = TensorView{act + a * BTC, d.act, dev, Shape{BT, head_chunked() ? Vc_ : Vp_}};
  if (head_chunked()) h.dlnf_part = TensorView{act + a * (BTC + BT * Vc_), d.act, dev, Shape{d.B, d.T, d.C}};
  return h;
}

void LlamaModel::embedding_forward(ParamStore& store, TensorView tokens) {
  const int emb = embedding_unit();
  const bool chunks = config_.tie_embeddings && head_chunked();
  // (Chunks: the table's first chunk pinned in one fp32-copy slot while the others take turns in
  // the other.)
  with_params(store, params_, emb, Pass::kForward, chunks ? 0 : -1, [&](TensorView unit) {
    const TensorView table = embedding_view(table_, unit);
    if (!chunks) {
      ops::embedding_forward(ctx_, resid(0), tokens, table, TensorView{});
    } else {
      chunked_embedding_forward(ctx_, store, *this, resid(0), tokens, table, TensorView{});
    }
  });
}

void LlamaModel::head_forward(ParamStore& store, TensorView targets, float* logits_out) {
  const LayerDims& d = dims_;
  const int emb = embedding_unit(), fin = final_unit(config_);
  head_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, d.act,
                        head_bytes(d, Vp_, Vc_) / static_cast<std::int64_t>(dtype_size_bytes(d.act)), false);
  const HeadViews h = head_views();
  with_params(store, params_, fin, Pass::kForward, 0, [&](TensorView fin_unit) {
    const FinalParams fp = final_views(table_, config_, fin_unit);
    ops::rmsnorm_forward(ctx_, h.lnf, h.rstd, resid(config_.n_layer), fp.norm, config_.norm_eps);
    if (head_chunked()) {
      chunked_head_forward(ctx_, store, *this, chunked_views(h), targets, config_.vocab_size, logits_out);
      return;
    }
    const auto logits = [&](TensorView head_w) {
      ops::matmul_forward(ctx_, h.logits, h.lnf, head_w, WeightLayout::kOutIn, TensorView{});
    };
    if (config_.tie_embeddings) {
      with_params(store, params_, emb, Pass::kForward, 1,
                  [&](TensorView unit) { logits(embedding_view(table_, unit)); });
    } else {
      logits(fp.lm_head);
    }
    if (logits_out != nullptr) copy_logits_out(ctx_, h.logits, 0, config_.vocab_size, logits_out);
    ops::softmax_cross_entropy_forward(ctx_, h.losses, h.logits, h.logits, targets, config_.vocab_size);
  });
}

void LlamaModel::head_backward(ParamStore& store, TensorView targets, float loss_scale, TensorView dresid) {
  const LayerDims& d = dims_;
  const int emb = embedding_unit(), fin = final_unit(config_);
  const HeadViews h = head_views();
  const float dloss = loss_scale / static_cast<float>(d.BT());
  const TensorView dlnf{layer_scratch_.a.data(), d.act, layer_scratch_.a.device(), Shape{d.B, d.T, d.C}};
  if (!head_chunked()) {
    ops::softmax_cross_entropy_backward(ctx_, h.logits, h.logits, targets, dloss, config_.vocab_size);
    if (config_.tie_embeddings) {  // the head's round of the tied table's gradient first
      with_params(store, params_, emb, Pass::kBackward, 1, [&](TensorView unit) {
        add_grads(store, emb, grad_destination(store, emb), GradRound::kPartial, [&](TensorView grad) {
          ops::matmul_backward(ctx_, dlnf, embedding_view(table_, grad), TensorView{}, h.logits, h.lnf,
                               embedding_view(table_, unit), WeightLayout::kOutIn);
        });
      });
    }
  } else {
    chunked_head_backward(ctx_, store, *this, chunked_views(h), dlnf, targets, config_.vocab_size, dloss);
  }
  with_params(store, params_, fin, Pass::kBackward, 0, [&](TensorView fin_unit) {
    const FinalParams fp = final_views(table_, config_, fin_unit);
    add_grads(store, fin, grad_destination(store, fin), GradRound::kLast, [&](TensorView grad) {
      const FinalParams fg = final_views(table_, config_, grad);
      if (fp.lm_head.data != nullptr) {  // untied, in one chunk
        ops::matmul_backward(ctx_, dlnf, fg.lm_head, TensorView{}, h.logits, h.lnf, fp.lm_head, WeightLayout::kOutIn);
      }
      ops::fill_zero(ctx_, dresid);
      ops::rmsnorm_backward(ctx_, dresid, fg.norm, dlnf, resid(config_.n_layer), fp.norm, h.rstd);
    });
  });
  head_.reset();
}

void LlamaModel::embedding_backward(ParamStore& store, TensorView tokens, TensorView dresid) {
  // A scatter-add of dresid: reads no weights. A tied chunked table takes it chunk by chunk (each
  // chunk's second round).
  if (config_.tie_embeddings && head_chunked()) {
    chunked_embedding_backward(ctx_, store, *this, dresid, tokens);
    return;
  }
  const int unit = embedding_unit();
  add_grads(store, unit, zeroed_grad(unit), GradRound::kLast, [&](TensorView grad) {
    ops::embedding_backward(ctx_, embedding_view(table_, grad), TensorView{}, dresid, tokens);
  });
}

int LlamaModel::unit(int chunk) const { return head_chunk_unit(config_, chunk); }

KernelParams& LlamaModel::kernel_params() { return params_; }

TensorView LlamaModel::rows_of(const TensorView& unit_view, int chunk) const {
  return head_chunk_view(table_, config_, chunk, unit_view);
}

ChunkedHeadViews LlamaModel::chunked_views(const HeadViews& h) const {
  return {h.lnf, h.logits, h.row_max, h.row_sum, h.target_logit, h.losses, h.dlnf_part};
}

}  // namespace zt::llama
