// The Llama parameter table, unit views and initialisation.
#include "models/llama/llama_params.h"

#include <fmt/format.h>

#include <cstring>

#include "engine/core/check.h"
#include "engine/core/philox.h"

namespace zt::llama {

ParamTable build_param_table(const LlamaConfig& c) {
  ZT_CHECK(llama_config_error(c).empty(), "{}", llama_config_error(c));
  const std::int64_t C = c.n_embd, V = c.vocab_size, Vp = c.padded_vocab_size(), hs = c.head_size();
  const std::int64_t q = c.n_head * hs, kv = c.n_kv_head * hs, I = c.hidden();
  ParamTable t;
  t.add_unit("embeddings");
  t.add_param("model.embed_tokens.weight", {Vp, C}, {V, C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    t.add_unit(fmt::format("layers.{}", l));
    const std::string p = fmt::format("model.layers.{}.", l);
    auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decays) {
      t.add_param(p + name, shape, shape, decays);
    };
    add("input_layernorm.weight", {C}, false);
    add("self_attn.q_proj.weight", {q, C}, true);
    add("self_attn.k_proj.weight", {kv, C}, true);
    add("self_attn.v_proj.weight", {kv, C}, true);
    add("self_attn.o_proj.weight", {C, q}, true);
    add("post_attention_layernorm.weight", {C}, false);
    add("mlp.gate_proj.weight", {I, C}, true);
    add("mlp.up_proj.weight", {I, C}, true);
    add("mlp.down_proj.weight", {C, I}, true);
  }
  t.add_unit("final");
  t.add_param("model.norm.weight", {C}, {C}, false);
  if (!c.tie_embeddings) t.add_param("lm_head.weight", {Vp, C}, {V, C}, true);
  return t;
}

TensorView embedding_view(const ParamTable& t, const TensorView& unit) {
  return t.view(t.units()[embedding_unit()].params[0], unit);
}

namespace {

// Rows [0, rows) of a, continued by b (consecutive in the unit): the stacked view of two or three
// parameters that one matmul reads together.
TensorView stacked(const TensorView& first, std::int64_t rows) {
  TensorView v = first;
  v.shape = Shape{rows, first.shape[1]};
  return v;
}

}  // namespace

LayerParams layer_views(const ParamTable& t, int layer, const TensorView& unit) {
  const int i = t.units()[static_cast<std::size_t>(layer_unit(layer))].params[0];
  const TensorView q = t.view(i + 1, unit), k = t.view(i + 2, unit), v = t.view(i + 3, unit);
  const TensorView gate = t.view(i + 6, unit), up = t.view(i + 7, unit);
  return {t.view(i, unit),     stacked(q, q.shape[0] + k.shape[0] + v.shape[0]), t.view(i + 4, unit),
          t.view(i + 5, unit), stacked(gate, gate.shape[0] + up.shape[0]),       t.view(i + 8, unit)};
}

FinalParams final_views(const ParamTable& t, const LlamaConfig& c, const TensorView& unit) {
  const int first = t.units()[static_cast<std::size_t>(final_unit(c))].params[0];
  return {t.view(first, unit), c.tie_embeddings ? TensorView{} : t.view(first + 1, unit)};
}

void init_unit_params(const ParamTable& t, const LlamaConfig& c, int unit, std::uint64_t seed, float* unit_data) {
  (void)c;
  for (int index : t.units().at(static_cast<std::size_t>(unit)).params) {
    const ParamSpec& p = t.param(index);
    float* data = unit_data + p.offset;
    if (p.name.ends_with("norm.weight")) {  // RMSNorm gains
      for (std::int64_t i = 0; i < p.numel; ++i) data[i] = 1.0f;
      continue;
    }
    // Only the true rows are drawn; padded vocabulary rows stay zero and never receive gradient.
    std::int64_t live = 1;
    for (std::int64_t d : p.hf_shape) live *= d;
    for (std::int64_t i = 0; i < p.numel; ++i) {
      data[i] = i < live ? static_cast<float>(0.02 * philox_normal(seed, static_cast<std::uint32_t>(index),
                                                                   static_cast<std::uint64_t>(i)))
                         : 0.0f;
    }
  }
}

}  // namespace zt::llama
