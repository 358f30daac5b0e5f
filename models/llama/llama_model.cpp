// The Llama decoder's passes (see the header).
#include "models/llama/llama_model.h"

#include "kernels/ops.h"

namespace zt::llama {

PassSchedule forward_schedule(const LlamaConfig& c) {
  const int emb = embedding_unit(), fin = final_unit(c);
  PassSchedule s{{UnitOp::kAcquire, emb}, {UnitOp::kRelease, emb}};
  for (int l = 0; l < c.n_layer; ++l) {
    s.push_back({UnitOp::kAcquire, layer_unit(l)});
    s.push_back({UnitOp::kRelease, layer_unit(l)});
  }
  s.push_back({UnitOp::kAcquire, fin});
  if (c.tie_embeddings) {
    s.push_back({UnitOp::kAcquire, emb});
    s.push_back({UnitOp::kRelease, emb});
  }
  s.push_back({UnitOp::kRelease, fin});
  return s;
}

PassSchedule backward_schedule(const LlamaConfig& c) {
  const int emb = embedding_unit(), fin = final_unit(c);
  PassSchedule s;
  if (c.tie_embeddings) {
    for (UnitOp op : {UnitOp::kAcquire, UnitOp::kAccumulate, UnitOp::kRelease}) s.push_back({op, emb});
  }
  for (UnitOp op : {UnitOp::kAcquire, UnitOp::kAccumulate, UnitOp::kGradsReady, UnitOp::kRelease}) {
    s.push_back({op, fin});
  }
  for (int l = c.n_layer - 1; l >= 0; --l) {
    for (UnitOp op : {UnitOp::kAcquire, UnitOp::kAccumulate, UnitOp::kGradsReady, UnitOp::kRelease}) {
      s.push_back({op, layer_unit(l)});
    }
  }
  s.push_back({UnitOp::kAccumulate, emb});
  s.push_back({UnitOp::kGradsReady, emb});
  return s;
}

std::int64_t head_bytes(const LayerDims& d, std::int64_t Vp) {
  return 8 * d.BT() + static_cast<std::int64_t>(dtype_size_bytes(d.act)) * d.BT() * (d.C + Vp);
}

LlamaModel::LlamaModel(const LlamaConfig& config, int batch, int seq_len, CheckpointPolicy policy,
                       MemoryTracker& tracker, const ExecContext& ctx, DType activations)
    : config_(config),
      table_(build_param_table(config)),
      dims_(layer_dims(config, batch, seq_len, activations, ctx.device)),
      Vp_(config.padded_vocab_size()),
      policy_(policy),
      tracker_(tracker),
      ctx_(ctx),
      params_(table_, activations, tracker, ctx),
      forward_schedule_(forward_schedule(config)),
      backward_schedule_(backward_schedule(config)),
      grad_scratch_(ops::allocate(ctx, tracker, MemCategory::kWorkspace, DType::kF32, table_.max_unit_numel())),
      dresid_(ops::allocate(ctx, tracker, MemCategory::kWorkspace, activations, dims_.BT() * dims_.C)),
      layer_scratch_(tracker, dims_, ctx) {
  ZT_CHECK(batch > 0 && seq_len > 0 && seq_len <= config.block_size);
  layer_acts_.resize(static_cast<std::size_t>(config.n_layer));
}

LlamaModel::~LlamaModel() = default;

void LlamaModel::release_activations() {
  head_.reset();
  for (auto& a : layer_acts_) a.reset();
  stream_.reset();
  tokens_.reset();
}

TensorView LlamaModel::resid(int layer) const {
  const std::int64_t BTC = dims_.BT() * dims_.C;
  TensorView v = stream_.view().slice(layer * BTC, BTC);
  v.shape = Shape{dims_.B, dims_.T, dims_.C};
  return v;
}

TensorView LlamaModel::zeroed_grad(int unit) {
  const TensorView g = grad_scratch_.view().slice(0, table_.units()[static_cast<std::size_t>(unit)].numel);
  ops::fill_zero(ctx_, g);
  return g;
}

namespace {

// The head buffer's parts: rstd [BT] and losses [BT] in fp32, then lnf [BT, C] and the logits
// (probabilities after the loss) [BT, Vp] in the activation dtype.
struct HeadViews {
  TensorView rstd, losses, lnf, probs;
};

HeadViews head_views(const Buffer& b, const LayerDims& d, std::int64_t Vp) {
  char* p = static_cast<char*>(b.data());
  const Device dev = b.device();
  const std::int64_t a = static_cast<std::int64_t>(dtype_size_bytes(d.act));
  HeadViews h;
  h.rstd = TensorView{p, DType::kF32, dev, Shape{d.B, d.T}};
  h.losses = TensorView{p + 4 * d.BT(), DType::kF32, dev, Shape{d.BT()}};
  h.lnf = TensorView{p + 8 * d.BT(), d.act, dev, Shape{d.B, d.T, d.C}};
  h.probs = TensorView{p + 8 * d.BT() + a * d.BT() * d.C, d.act, dev, Shape{d.BT(), Vp}};
  return h;
}

}  // namespace

float LlamaModel::forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                          const ForwardOptions& options) {
  // A forward not followed by backward (evaluation) leaves its activations: freed before any new
  // allocation, so a step's peak is its own.
  release_activations();
  params_.forget();  // the parameters may have changed since the last forward
  float* logits_out = options.logits_out;
  const LayerDims& d = dims_;
  const int L = config_.n_layer, emb = embedding_unit(), fin = final_unit(config_);
  tokens_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kI32, 2 * d.BT(), false);
  const TensorView in{tokens_.data(), DType::kI32, tokens_.device(), Shape{d.B, d.T}};
  const TensorView tg{static_cast<std::int32_t*>(tokens_.data()) + d.BT(), DType::kI32, tokens_.device(),
                      Shape{d.BT()}};
  ops::copy(ctx_, in, TensorView{const_cast<std::int32_t*>(inputs), DType::kI32, Device::kCPU, in.shape});
  ops::copy(ctx_, tg, TensorView{const_cast<std::int32_t*>(targets), DType::kI32, Device::kCPU, tg.shape});
  stream_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, d.act, (L + 1) * d.BT() * d.C, false);

  store.begin_pass(Pass::kForward, forward_schedule_, true);
  ops::embedding_forward(ctx_, resid(0), in, embedding_view(table_, params_.acquire(store, emb, Pass::kForward)),
                         TensorView{});
  store.release_params(emb, Pass::kForward);
  for (int l = 0; l < L; ++l) {
    const LayerParams p = layer_views(table_, l, params_.acquire(store, layer_unit(l), Pass::kForward));
    auto acts = std::make_unique<LayerActivations>(tracker_, d, ctx_);
    layer_forward(ctx_, config_, p, resid(l), *acts, resid(l + 1));
    // A checkpointed layer keeps only its input (resid(l)); backward recomputes the rest.
    if (!policy_.is_checkpointed(l)) layer_acts_[static_cast<std::size_t>(l)] = std::move(acts);
    store.release_params(layer_unit(l), Pass::kForward);
  }
  head_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, d.act, head_bytes(d, Vp_) / dtype_size_bytes(d.act),
                        false);
  const HeadViews h = head_views(head_, d, Vp_);
  const FinalParams fp = final_views(table_, config_, params_.acquire(store, fin, Pass::kForward, 0));
  ops::rmsnorm_forward(ctx_, h.lnf, h.rstd, resid(L), fp.norm, config_.norm_eps);
  TensorView head_w = fp.lm_head;
  if (config_.tie_embeddings) head_w = embedding_view(table_, params_.acquire(store, emb, Pass::kForward, 1));
  ops::matmul_forward(ctx_, h.probs, h.lnf, head_w, ops::WeightLayout::kOutIn, TensorView{});
  if (config_.tie_embeddings) store.release_params(emb, Pass::kForward);
  store.release_params(fin, Pass::kForward);
  store.end_pass(Pass::kForward);
  if (logits_out != nullptr) copy_logits_out(ctx_, h.probs, 0, config_.vocab_size, logits_out);
  ops::softmax_cross_entropy_forward(ctx_, h.losses, h.probs, h.probs, tg, config_.vocab_size);
  return mean_loss(ctx_, h.losses);
}

void LlamaModel::backward(ParamStore& store, float loss_scale) {
  ZT_CHECK(!head_.empty(), "backward without forward");
  const LayerDims& d = dims_;
  const int L = config_.n_layer, emb = embedding_unit(), fin = final_unit(config_);
  const HeadViews h = head_views(head_, d, Vp_);
  const TensorView in{tokens_.data(), DType::kI32, tokens_.device(), Shape{d.B, d.T}};
  const TensorView tg{static_cast<std::int32_t*>(tokens_.data()) + d.BT(), DType::kI32, tokens_.device(),
                      Shape{d.BT()}};
  const TensorView dresid = dresid_.view(Shape{d.B, d.T, d.C});
  const TensorView dlnf{layer_scratch_.a.data(), d.act, layer_scratch_.a.device(), Shape{d.B, d.T, d.C}};
  ops::softmax_cross_entropy_backward(ctx_, h.probs, h.probs, tg, loss_scale / static_cast<float>(d.BT()),
                                      config_.vocab_size);

  store.begin_pass(Pass::kBackward, backward_schedule_, false);
  if (config_.tie_embeddings) {  // the head's contribution to the tied table first
    const TensorView wte = embedding_view(table_, params_.acquire(store, emb, Pass::kBackward, 1));
    const TensorView g = zeroed_grad(emb);
    ops::matmul_backward(ctx_, dlnf, embedding_view(table_, g), TensorView{}, h.probs, h.lnf, wte,
                         ops::WeightLayout::kOutIn);
    store.accumulate_grads(emb, g);
    store.release_params(emb, Pass::kBackward);
  }
  {
    const FinalParams fp = final_views(table_, config_, params_.acquire(store, fin, Pass::kBackward, 0));
    const TensorView g = zeroed_grad(fin);
    const FinalParams fg = final_views(table_, config_, g);
    if (!config_.tie_embeddings) {
      ops::matmul_backward(ctx_, dlnf, fg.lm_head, TensorView{}, h.probs, h.lnf, fp.lm_head, ops::WeightLayout::kOutIn);
    }
    ops::fill_zero(ctx_, dresid);
    ops::rmsnorm_backward(ctx_, dresid, fg.norm, dlnf, resid(L), fp.norm, h.rstd);
    store.accumulate_grads(fin, g);
    store.grads_ready(fin);
    store.release_params(fin, Pass::kBackward);
    head_.reset();
  }
  for (int l = L - 1; l >= 0; --l) {
    const int unit = layer_unit(l);
    const LayerParams p = layer_views(table_, l, params_.acquire(store, unit, Pass::kBackward));
    std::unique_ptr<LayerActivations>& acts = layer_acts_[static_cast<std::size_t>(l)];
    if (policy_.is_checkpointed(l)) {
      acts = std::make_unique<LayerActivations>(tracker_, d, ctx_);
      layer_forward(ctx_, config_, p, resid(l), *acts, resid(l + 1));
    }
    const TensorView g = zeroed_grad(unit);
    layer_backward(ctx_, config_, p, layer_views(table_, l, g), resid(l), *acts, dresid, layer_scratch_);
    acts.reset();
    store.accumulate_grads(unit, g);
    store.grads_ready(unit);
    store.release_params(unit, Pass::kBackward);
  }
  {  // the embedding's scatter-add reads no weights
    const TensorView g = zeroed_grad(emb);
    ops::embedding_backward(ctx_, embedding_view(table_, g), TensorView{}, dresid, in);
    store.accumulate_grads(emb, g);
    store.grads_ready(emb);
  }
  store.end_pass(Pass::kBackward);
  stream_.reset();
  tokens_.reset();
}

}  // namespace zt::llama
