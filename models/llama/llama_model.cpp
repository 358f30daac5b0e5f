// The Llama decoder's passes (see the header).
#include "models/llama/llama_model.h"

#include "kernels/ops.h"
#include "models/head_chunks.h"
#include "models/unit_scope.h"

namespace zt::llama {

std::int64_t head_bytes(const LayerDims& d, std::int64_t Vp, std::int64_t Vc) {
  const std::int64_t a = static_cast<std::int64_t>(dtype_size_bytes(d.act)), BT = d.BT();
  if (Vc < Vp) return 4 * 5 * BT + a * (2 * BT * d.C + BT * Vc);
  return 8 * BT + a * BT * (d.C + Vp);
}

LlamaModel::LlamaModel(const LlamaConfig& config, int batch, int seq_len, CheckpointPolicy policy,
                       MemoryTracker& tracker, const ExecContext& ctx, DType activations, const UnitLayout& layout,
                       bool with_backward)
    : config_(config),
      layout_(layout),
      table_(build_param_table(config, layout)),
      dims_(layer_dims(config, batch, seq_len, activations, ctx.device, policy.selective())),
      Vp_(config.padded_vocab_size()),
      Vc_(head_chunk_columns(Vp_, layout.head_chunks)),
      tracker_(tracker),
      ctx_(ctx),
      params_(table_, activations, tracker, ctx),
      layers_(layer_unit_ids(config, layout), policy, params_, *this),
      forward_schedule_(forward_schedule(config, layout)),
      backward_schedule_(backward_schedule(config, layout, policy)),
      // A forwards-only model (sampling) allocates none of the backward's scratch.
      grad_scratch_(with_backward
                        ? ops::allocate(ctx, tracker, MemCategory::kWorkspace, DType::kF32, table_.max_unit_numel())
                        : Buffer()),
      dresid_(with_backward ? ops::allocate(ctx, tracker, MemCategory::kWorkspace, activations, dims_.BT() * dims_.C)
                            : Buffer()),
      layer_scratch_(with_backward ? LayerGradScratch(tracker, dims_, ctx) : LayerGradScratch()),
      recompute_scratch_(tracker, dims_, ctx) {
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

TensorView LlamaModel::input_tokens() const {
  return TensorView{tokens_.data(), DType::kI32, tokens_.device(), Shape{dims_.B, dims_.T}};
}

TensorView LlamaModel::target_tokens() const {
  return TensorView{static_cast<std::int32_t*>(tokens_.data()) + dims_.BT(), DType::kI32, tokens_.device(),
                    Shape{dims_.BT()}};
}

TensorView LlamaModel::zeroed_grad(int unit) {
  const TensorView g = grad_scratch_.view().slice(0, table_.units()[static_cast<std::size_t>(unit)].numel);
  ops::fill_zero(ctx_, g);
  return g;
}

float LlamaModel::forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                          const ForwardOptions& options) {
  // A forward not followed by backward (evaluation) leaves its activations: freed before any new
  // allocation, so a step's peak is its own.
  release_activations();
  check_decoding(options, dims_.B, dims_.T, kv_cache_shape());
  kv_cache_ = options.kv_cache;
  params_.forget();  // the parameters may have changed since the last forward
  float* logits_out = options.logits_out;
  const LayerDims& d = dims_;
  const int L = config_.n_layer;
  tokens_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, DType::kI32, 2 * d.BT(), false);
  const TensorView in = input_tokens(), tg = target_tokens();
  ops::copy(ctx_, in, TensorView{const_cast<std::int32_t*>(inputs), DType::kI32, Device::kCPU, in.shape});
  ops::copy(ctx_, tg, TensorView{const_cast<std::int32_t*>(targets), DType::kI32, Device::kCPU, tg.shape});
  stream_ = ops::allocate(ctx_, tracker_, MemCategory::kActivations, d.act, (L + 1) * d.BT() * d.C, false);

  store.begin_pass(Pass::kForward, forward_schedule_, options.training ? &backward_schedule_ : nullptr);
  embedding_forward(store, in);
  for (int l = 0; l < L; ++l) layers_.forward(store, l);
  head_forward(store, tg, logits_out);
  store.end_pass(Pass::kForward);
  if (kv_cache_ != nullptr) kv_cache_->advance(d.T);
  kv_cache_ = nullptr;
  return mean_loss(ctx_, head_views().losses, options.losses_out);
}

KvCacheShape LlamaModel::kv_cache_shape() const {
  return {dims_.act, config_.n_layer, config_.qkv_width(), config_.block_size};
}

std::unique_ptr<KvCache> LlamaModel::make_kv_cache(std::int64_t capacity) const {
  return KvCache::for_model(tracker_, ctx_, kv_cache_shape(), config_.head_size(), capacity);
}

void LlamaModel::backward(ParamStore& store, float loss_scale) {
  ZT_CHECK(!head_.empty(), "backward without forward");
  ZT_CHECK(grad_scratch_.data() != nullptr, "backward of a model built for forwards only (sampling)");
  const LayerDims& d = dims_;
  const int L = config_.n_layer;
  const TensorView in = input_tokens(), tg = target_tokens();
  const TensorView dresid = dresid_.view(Shape{d.B, d.T, d.C});
  store.begin_pass(Pass::kBackward, backward_schedule_, nullptr);
  head_backward(store, tg, loss_scale, dresid);                 // frees the head's activations
  for (int l = L - 1; l >= 0; --l) layers_.backward(store, l);  // dresid: d(layer output) to d(input)
  embedding_backward(store, in, dresid);
  store.end_pass(Pass::kBackward);
  stream_.reset();
  tokens_.reset();
}

LayerParams LlamaModel::layer_params(int l, const BlockUnits& units) const {
  if (layout_.block_units == 2) return layer_views(table_, config_, layout_, l, units.attn, units.mlp);
  return layer_views(table_, l, units.attn);
}

void LlamaModel::allocate_block_activations(int l) {
  // Decoding reads its attention from the cache and keeps nothing for a backward: no [B, NH, T, T]
  // probabilities (laid out as for the flash kernels, whose lse it never writes either).
  LayerDims d = dims_;
  if (kv_cache_ != nullptr) d.flash_attention = true;
  layer_acts_[static_cast<std::size_t>(l)] = std::make_unique<LayerActivations>(tracker_, d, ctx_, &recompute_scratch_);
}

void LlamaModel::free_block_activations(int l) { layer_acts_[static_cast<std::size_t>(l)].reset(); }

void LlamaModel::forward_part(int l, BlockPart part, const BlockUnits& params) {
  const LayerParams p = layer_params(l, params);
  LayerActivations& acts = *layer_acts_[static_cast<std::size_t>(l)];
  if (part == BlockPart::kAttention) {
    if (kv_cache_ != nullptr) {
      const KvStep kv = kv_cache_->step(l, dims_.T);
      attention_half_forward(ctx_, config_, p, resid(l), acts, &kv);
      return;
    }
    attention_half_forward(ctx_, config_, p, resid(l), acts);
  } else {
    mlp_half_forward(ctx_, config_, p, acts, resid(l + 1));
  }
}

void LlamaModel::recompute_block(int l, const BlockUnits& params) {
  layer_forward(ctx_, config_, layer_params(l, params), resid(l), *layer_acts_[static_cast<std::size_t>(l)],
                resid(l + 1));
}

void LlamaModel::backward_part(int l, BlockPart part, const BlockUnits& params, const BlockUnits& grads) {
  const LayerParams p = layer_params(l, params), g = layer_params(l, grads);
  const LayerActivations& acts = *layer_acts_[static_cast<std::size_t>(l)];
  const TensorView dresid = dresid_.view(Shape{dims_.B, dims_.T, dims_.C});
  if (part == BlockPart::kMlp) {
    mlp_half_backward(ctx_, config_, p, g, acts, dresid, layer_scratch_);
  } else {
    attention_half_backward(ctx_, config_, p, g, resid(l), acts, dresid, layer_scratch_);
  }
}

// The layer's products and RMSNorm add into the store's storage where it lends it.
TensorView LlamaModel::grad_destination(ParamStore& store, int unit) {
  return destination_for_grads(store, unit, ctx_, dims_.act, [&] { return zeroed_grad(unit); });
}

}  // namespace zt::llama
