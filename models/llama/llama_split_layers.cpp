// LlamaModel's layers in two units (train.block_units = 2): the attention half and the MLP half
// gathered, freed and reduced one at a time, so a stage-3 rank holds at most one half of a layer
// beside what it prefetches. The kernels run in the whole layer's order, so the bits are the
// same; only the store calls between them differ (llama_schedule.cpp).
#include "models/llama/llama_model.h"

namespace zt::llama {

void LlamaModel::split_layer_forward(ParamStore& store, int l) {
  const int attn = layer_unit(l), mlp = mlp_unit(config_, layout_, l);
  auto acts = std::make_unique<LayerActivations>(tracker_, dims_, ctx_);
  attention_half_forward(
      ctx_, config_,
      layer_views(table_, config_, layout_, l, params_.acquire(store, attn, Pass::kForward), TensorView{}), resid(l),
      *acts);
  store.release_params(attn, Pass::kForward);
  mlp_half_forward(ctx_, config_,
                   layer_views(table_, config_, layout_, l, TensorView{}, params_.acquire(store, mlp, Pass::kForward)),
                   *acts, resid(l + 1));
  store.release_params(mlp, Pass::kForward);
  // A checkpointed layer keeps only its input (resid(l)); backward recomputes the rest.
  if (!policy_.is_checkpointed(l)) layer_acts_[static_cast<std::size_t>(l)] = std::move(acts);
}

void LlamaModel::split_layer_backward(ParamStore& store, int l, TensorView dresid) {
  const int attn = layer_unit(l), mlp = mlp_unit(config_, layout_, l);
  const bool recompute = policy_.is_checkpointed(l);
  std::unique_ptr<LayerActivations>& acts = layer_acts_[static_cast<std::size_t>(l)];
  // The recompute reads both halves: the attention unit first, as the schedule has it.
  TensorView attn_params = recompute ? params_.acquire(store, attn, Pass::kBackward) : TensorView{};
  const LayerParams p =
      layer_views(table_, config_, layout_, l, attn_params, params_.acquire(store, mlp, Pass::kBackward));
  if (recompute) {
    acts = std::make_unique<LayerActivations>(tracker_, dims_, ctx_);
    layer_forward(ctx_, config_, p, resid(l), *acts, resid(l + 1));
  }
  const TensorView mlp_grad = zeroed_grad(mlp);
  mlp_half_backward(ctx_, p, layer_views(table_, config_, layout_, l, TensorView{}, mlp_grad), *acts, dresid,
                    layer_scratch_);
  store.accumulate_grads(mlp, mlp_grad);
  store.grads_ready(mlp);
  store.release_params(mlp, Pass::kBackward);
  if (!recompute) attn_params = params_.acquire(store, attn, Pass::kBackward);
  const LayerParams pa = layer_views(table_, config_, layout_, l, attn_params, TensorView{});
  const TensorView attn_grad = zeroed_grad(attn);
  attention_half_backward(ctx_, config_, pa, layer_views(table_, config_, layout_, l, attn_grad, TensorView{}),
                          resid(l), *acts, dresid, layer_scratch_);
  acts.reset();
  store.accumulate_grads(attn, attn_grad);
  store.grads_ready(attn);
  store.release_params(attn, Pass::kBackward);
}

}  // namespace zt::llama
