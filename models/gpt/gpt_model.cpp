// GPT-2 forward/backward: embeddings -> blocks -> final LN -> tied LM head -> cross-entropy, and
// back, acquiring each unit's parameters from the ParamStore just before it computes. Every
// buffer is in the context's memory and every kernel runs on its device (kernels/ops.h); only the
// token ids come from, and the losses and logits go back to, the host.
#include "models/gpt/gpt_model.h"

#include "models/gpt/gpt_schedule.h"
#include "models/unit_scope.h"

#include <algorithm>
#include <cstring>

#include <vector>

#include "engine/base/core/bf16.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/ops.h"

namespace zt::gpt {

GptModel::GptModel(const GptConfig& config, int batch, int seq_len, CheckpointPolicy policy, MemoryTracker& tracker,
                   const ExecContext& ctx, float dropout, std::uint64_t seed, DType activations,
                   const UnitLayout& layout, bool with_backward)
    : config_(config),
      layout_(layout),
      table_(build_param_table(config, layout)),
      dims_(activation_dims(config, batch, seq_len, ctx.device, activations, layout.head_chunks, policy.selective())),
      tracker_(tracker),
      ctx_(ctx),
      dropout_(dropout),
      seed_(seed),
      params_(table_, dims_.act, tracker, ctx),
      blocks_(block_unit_ids(config, layout), policy, params_, *this),
      // A forwards-only model (sampling) allocates none of the backward's scratch.
      block_scratch_(with_backward ? BlockGradScratch(tracker, dims_, ctx) : BlockGradScratch()),
      recompute_scratch_(tracker, dims_, ctx),
      dresid_(with_backward ? ops::allocate(ctx, tracker, MemCategory::kWorkspace, dims_.act, dims_.BTC()) : Buffer()),
      grad_scratch_(with_backward
                        ? ops::allocate(ctx, tracker, MemCategory::kWorkspace, DType::kF32, table_.max_unit_numel())
                        : Buffer()),
      forward_schedule_(forward_schedule(config, layout)),
      backward_schedule_(backward_schedule(config, layout, policy)) {
  ZT_CHECK(batch > 0 && seq_len > 0 && seq_len <= config.block_size);
  block_acts_.resize(static_cast<std::size_t>(config.n_layer));
}

GptModel::~GptModel() = default;

DropoutSpec GptModel::dropout_spec(std::uint32_t site) const {
  return DropoutSpec{step_.training ? dropout_ : 0.0f, seed_, site, step_.first_sample};
}

BlockDropout GptModel::block_dropout(int layer) const {
  return {dropout_spec(dropout_site(layer, DropoutSite::kAttentionProbs)),
          dropout_spec(dropout_site(layer, DropoutSite::kAttentionResidual)),
          dropout_spec(dropout_site(layer, DropoutSite::kMlpResidual))};
}

void GptModel::release_activations() {
  head_acts_.reset();
  for (auto& a : block_acts_) a.reset();
  stream_.reset();
}

TensorView GptModel::resid(int layer) const {
  const ActivationDims& d = dims_;
  char* stream = static_cast<char*>(stream_.data()) + token_ids_bytes(d);
  return TensorView{stream + layer * d.BTC() * d.act_bytes(), d.act, stream_.device(), Shape{d.B, d.T, d.C}};
}

TensorView GptModel::token_view(int which, Shape shape) const {
  auto* tokens = static_cast<std::int32_t*>(stream_.data());
  return TensorView{tokens + which * dims_.BT(), DType::kI32, stream_.device(), shape};
}

TensorView GptModel::zeroed_grad_scratch(int unit) {
  const std::int64_t n = table_.units()[static_cast<std::size_t>(unit)].numel;
  const TensorView grad = grad_scratch_.view().slice(0, n);
  ops::fill_zero(ctx_, grad);
  return grad;
}

TensorView GptModel::grad_destination(ParamStore& store, int unit) {
  return destination_for_grads(store, unit, ctx_, dims_.act, [&] { return zeroed_grad_scratch(unit); });
}

namespace {

// The position table's rows from `first` on, as a table: a decoding step's tokens follow the
// positions already cached.
TensorView position_rows_from(TensorView wpe, std::int64_t first) {
  const std::int64_t C = wpe.shape[1], rows = wpe.shape[0] - first;
  TensorView v = wpe.slice(first * C, rows * C);
  v.shape = Shape{rows, C};
  return v;
}

}  // namespace

KvCacheShape GptModel::kv_cache_shape() const {
  return {dims_.act, config_.n_layer, config_.qkv_width(), config_.block_size};
}

std::unique_ptr<KvCache> GptModel::make_kv_cache(std::int64_t capacity) const {
  return KvCache::for_model(tracker_, ctx_, kv_cache_shape(), config_.head_size(), capacity);
}

float GptModel::forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                        const ForwardOptions& options) {
  const ActivationDims& d = dims_;
  release_activations();
  check_decoding(options, d.B, d.T, kv_cache_shape());
  step_ = options;
  const std::int64_t first_position = options.kv_cache != nullptr ? options.kv_cache->length() : 0;
  float* logits_out = options.logits_out;
  const int L = config_.n_layer, emb = embedding_unit(), fin = final_unit(config_);
  params_.forget();  // parameters may have changed since the last step
  stream_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, d.act, residual_stream_bytes(d, L) / d.act_bytes(),
                          /*zero_fill=*/false);  // the embedding and each block write their whole output
  const TensorView input_view = token_view(0, Shape{d.B, d.T}), target_view = token_view(1, Shape{d.BT()});
  ops::copy(ctx_, input_view,
            TensorView{const_cast<std::int32_t*>(inputs), DType::kI32, Device::kCPU, input_view.shape});
  ops::copy(ctx_, target_view,
            TensorView{const_cast<std::int32_t*>(targets), DType::kI32, Device::kCPU, target_view.shape});

  store.begin_pass(Pass::kForward, forward_schedule_, options.training ? &backward_schedule_ : nullptr);
  // In chunks, the embeddings (wpe) and then ln_f stay in use while the chunks come: their fp32
  // copy (if any) keeps slot 0.
  const int slot = d.head_chunked() ? 0 : -1;
  with_params(store, params_, emb, Pass::kForward, slot, [&](TensorView unit) {
    const EmbeddingParams p = embedding_views(table_, unit);
    const TensorView wpe = position_rows_from(p.wpe, first_position);
    if (d.head_chunked()) {
      chunked_embedding_forward(ctx_, store, *this, resid(0), input_view, p.wte, wpe);
    } else {
      ops::embedding_forward(ctx_, resid(0), input_view, p.wte, wpe);
    }
    const DropoutSpec drop = dropout_spec(kEmbeddingDropoutSite);
    if (drop.active()) ops::dropout_forward(ctx_, resid(0), resid(0), drop);
  });
  for (int l = 0; l < L; ++l) blocks_.forward(store, l);

  head_acts_ = std::make_unique<HeadActivations>(tracker_, d, ctx_);
  HeadActivations& h = *head_acts_;
  with_params(store, params_, fin, Pass::kForward, slot, [&](TensorView fin_unit) {
    const FinalParams fp = final_views(table_, config_, fin_unit);
    if (d.head_chunked()) {  // each chunk's unit acquired and released in turn
      ops::layernorm_forward(ctx_, h.lnf, h.lnf_mean, h.lnf_rstd, resid(L), fp.ln_f_w, fp.ln_f_b);
      chunked_head_forward(ctx_, store, *this, chunked_head_views(), target_view, config_.vocab_size, logits_out);
      return;
    }
    with_params(store, params_, emb, Pass::kForward, -1, [&](TensorView emb_unit) {  // the tied wte
      ops::layernorm_forward(ctx_, h.lnf, h.lnf_mean, h.lnf_rstd, resid(L), fp.ln_f_w, fp.ln_f_b);
      ops::matmul_forward(ctx_, h.probs, h.lnf, embedding_views(table_, emb_unit).wte, ops::WeightLayout::kOutIn,
                          TensorView{});
    });
  });
  store.end_pass(Pass::kForward);
  if (options.kv_cache != nullptr) options.kv_cache->advance(d.T);
  if (d.head_chunked()) return zt::mean_loss(ctx_, head_acts_->losses, options.losses_out);
  if (logits_out != nullptr) zt::copy_logits_out(ctx_, h.probs, 0, config_.vocab_size, logits_out);
  if (options.backward_loss_scale.has_value()) {  // dlogits in place of the logits
    ops::softmax_cross_entropy_fused(ctx_, h.losses, h.probs, h.probs, target_view,
                                     *options.backward_loss_scale / static_cast<float>(d.BT()), config_.vocab_size);
  } else {
    ops::softmax_cross_entropy_forward(ctx_, h.losses, h.probs, h.probs, target_view, config_.vocab_size);
  }
  return zt::mean_loss(ctx_, head_acts_->losses, options.losses_out);
}

void GptModel::backward(ParamStore& store, float loss_scale) {
  ZT_CHECK(head_acts_ != nullptr, "backward without forward");
  ZT_CHECK(grad_scratch_.data() != nullptr, "backward of a model built for forwards only (sampling)");
  const ActivationDims& d = dims_;
  const int L = config_.n_layer, emb = embedding_unit(), fin = final_unit(config_);
  const TensorView input_view = token_view(0, Shape{d.B, d.T}), target_view = token_view(1, Shape{d.BT()});
  const TensorView dresid = dresid_.view(Shape{d.B, d.T, d.C});
  const TensorView dlnf = block_scratch_.d_btc.view(Shape{d.B, d.T, d.C});

  store.begin_pass(Pass::kBackward, backward_schedule_, nullptr);
  {  // Head: dlogits in place of the probabilities (unless the forward left them), then the tied
     // wte and ln_f.
    HeadActivations& h = *head_acts_;
    if (step_.backward_loss_scale.has_value()) {
      ZT_CHECK(*step_.backward_loss_scale == loss_scale,
               "backward: loss_scale {} is not the forward's backward_loss_scale {}", loss_scale,
               *step_.backward_loss_scale);
    } else if (!d.head_chunked()) {
      ops::softmax_cross_entropy_backward(ctx_, h.probs, h.probs, target_view, loss_scale / static_cast<float>(d.BT()),
                                          config_.vocab_size);
    }
    if (d.head_chunked()) {
      chunked_head_backward(ctx_, store, *this, chunked_head_views(), dlnf, target_view, config_.vocab_size,
                            loss_scale / static_cast<float>(d.BT()));
    } else {  // the head's round of the tied wte's gradient; the embedding's comes after the blocks
      with_params(store, params_, emb, Pass::kBackward, -1, [&](TensorView emb_unit) {
        add_grads(store, emb, grad_destination(store, emb), GradRound::kPartial, [&](TensorView grad) {
          ops::matmul_backward(ctx_, dlnf, embedding_views(table_, grad).wte, TensorView{}, h.probs, h.lnf,
                               embedding_views(table_, emb_unit).wte, ops::WeightLayout::kOutIn);
        });
      });
    }
    with_params(store, params_, fin, Pass::kBackward, d.head_chunked() ? 0 : -1, [&](TensorView fin_unit) {
      const FinalParams fp = final_views(table_, config_, fin_unit);
      add_grads(store, fin, grad_destination(store, fin), GradRound::kLast, [&](TensorView grad) {
        const FinalParams fg = final_views(table_, config_, grad);
        ops::fill_zero(ctx_, dresid);
        ops::layernorm_backward(ctx_, dresid, fg.ln_f_w, fg.ln_f_b, dlnf, resid(L), fp.ln_f_w, h.lnf_mean, h.lnf_rstd);
      });
    });
    head_acts_.reset();
  }

  for (int l = L - 1; l >= 0; --l) blocks_.backward(store, l);  // dresid: d(block output) to d(input)

  {  // The embedding backward is a scatter-add of dresid: it reads no weights, so none are acquired.
     // The head's contribution came first, so this one goes through the fp32 scratch.
    const DropoutSpec drop = dropout_spec(kEmbeddingDropoutSite);
    if (drop.active()) ops::dropout_backward(ctx_, dresid, dresid, drop);
    if (d.head_chunked()) {
      chunked_embedding_backward(ctx_, store, *this, dresid, input_view);
    } else {
      add_grads(store, emb, zeroed_grad_scratch(emb), GradRound::kLast, [&](TensorView grad) {
        const EmbeddingParams g = embedding_views(table_, grad);
        ops::embedding_backward(ctx_, g.wte, g.wpe, dresid, input_view);
      });
    }
  }
  store.end_pass(Pass::kBackward);
  stream_.reset();
}

BlockParams GptModel::block_params(int l, const BlockUnits& units) const {
  if (layout_.block_units == 2) return block_views(table_, config_, layout_, l, units.attn, units.mlp);
  return block_views(table_, l, units.attn);
}

void GptModel::allocate_block_activations(int l) {
  // Decoding reads its attention from the cache and keeps nothing for a backward: no [B, NH, T, T]
  // probabilities (laid out as for the flash kernels, whose lse it never writes either).
  ActivationDims d = dims_;
  if (step_.kv_cache != nullptr) d.flash_attention = true;
  block_acts_[static_cast<std::size_t>(l)] = std::make_unique<BlockActivations>(tracker_, d, ctx_, &recompute_scratch_);
}

void GptModel::free_block_activations(int l) { block_acts_[static_cast<std::size_t>(l)].reset(); }

void GptModel::forward_part(int l, BlockPart part, const BlockUnits& params) {
  const BlockParams p = block_params(l, params);
  BlockActivations& acts = *block_acts_[static_cast<std::size_t>(l)];
  if (part == BlockPart::kAttention) {
    if (step_.kv_cache != nullptr) {
      const KvStep kv = step_.kv_cache->step(l, dims_.T);
      attention_half_forward(ctx_, p, resid(l), acts, config_.n_head, block_dropout(l), &kv);
      return;
    }
    attention_half_forward(ctx_, p, resid(l), acts, config_.n_head, block_dropout(l));
  } else {
    mlp_half_forward(ctx_, p, resid(l), acts, resid(l + 1), block_dropout(l));
  }
}

void GptModel::recompute_block(int l, const BlockUnits& params) {
  // The block's output is kept (the next block's input): no out, so its last matmul is skipped.
  block_forward(ctx_, block_params(l, params), resid(l), *block_acts_[static_cast<std::size_t>(l)], TensorView{},
                config_.n_head, block_dropout(l));
}

void GptModel::backward_part(int l, BlockPart part, const BlockUnits& params, const BlockUnits& grads) {
  const BlockParams p = block_params(l, params), g = block_params(l, grads);
  const BlockActivations& acts = *block_acts_[static_cast<std::size_t>(l)];
  const TensorView dresid = dresid_.view(Shape{dims_.B, dims_.T, dims_.C});
  if (part == BlockPart::kMlp) {
    mlp_half_backward(ctx_, p, g, acts, dresid, block_scratch_, block_dropout(l));
  } else {
    attention_half_backward(ctx_, p, g, resid(l), acts, dresid, block_scratch_, config_.n_head, block_dropout(l));
  }
}

}  // namespace zt::gpt
