// The Llama parameter table, unit views and initialisation.
#include "models/llama/llama_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"
#include "models/head_chunks.h"

namespace zt::llama {

ParamTable build_param_table(const LlamaConfig& c, const UnitLayout& layout) {
  ZT_CHECK(llama_config_error(c).empty(), "{}", llama_config_error(c));
  ZT_CHECK(layout.block_units == 1 || layout.block_units == 2, "block_units {} is 1 or 2", layout.block_units);
  const int head_chunks = layout.head_chunks;
  const bool split = layout.block_units == 2;
  const std::int64_t C = c.n_embd, V = c.vocab_size, Vp = c.padded_vocab_size(), hs = c.head_size();
  const std::int64_t q = c.n_head * hs, kv = c.n_kv_head * hs, I = c.hidden();
  const std::int64_t Vc = head_chunk_columns(Vp, head_chunks);
  const bool chunked = Vc < Vp;
  ParamTable t;
  // Rows [first, first + rows) of a [Vp, C] table, of which those below V are Hugging Face's.
  auto add_rows = [&](const char* name, std::int64_t first, std::int64_t rows) {
    const std::int64_t live = std::clamp<std::int64_t>(V - first, 0, rows);
    t.add_param(name, {rows, C}, {live, C}, true, first);
  };
  t.add_unit("embeddings");
  add_rows("model.embed_tokens.weight", 0, chunked && c.tie_embeddings ? Vc : Vp);
  // Layer l's parameters: its attention half, then (mlp) its MLP half.
  auto add_half = [&](int l, bool mlp) {
    const std::string p = fmt::format("model.layers.{}.", l);
    auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decays) {
      t.add_param(p + name, shape, shape, decays);
    };
    if (!mlp) {
      add("input_layernorm.weight", {C}, false);
      add("self_attn.q_proj.weight", {q, C}, true);
      add("self_attn.k_proj.weight", {kv, C}, true);
      add("self_attn.v_proj.weight", {kv, C}, true);
      add("self_attn.o_proj.weight", {C, q}, true);
    } else {
      add("post_attention_layernorm.weight", {C}, false);
      add("mlp.gate_proj.weight", {I, C}, true);
      add("mlp.up_proj.weight", {I, C}, true);
      add("mlp.down_proj.weight", {C, I}, true);
    }
  };
  for (int l = 0; l < c.n_layer; ++l) {
    t.add_unit(fmt::format("layers.{}", l));
    add_half(l, false);
    if (!split) add_half(l, true);
  }
  t.add_unit("final");
  t.add_param("model.norm.weight", {C}, {C}, false);
  if (!c.tie_embeddings && !chunked) add_rows("lm_head.weight", 0, Vp);
  // The head's table in chunk units (tied: from chunk 1, chunk 0 being in the embeddings unit).
  for (std::int64_t first = c.tie_embeddings ? Vc : 0; chunked && first < Vp; first += Vc) {
    const char* name = c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    t.add_unit(fmt::format("{}.{}", c.tie_embeddings ? "embed_tokens" : "lm_head", first / Vc));
    add_rows(name, first, std::min(Vc, Vp - first));
  }
  for (int l = 0; split && l < c.n_layer; ++l) {
    t.add_unit(fmt::format("layers.{}.mlp", l));
    add_half(l, true);
  }
  return t;
}

int mlp_unit(const LlamaConfig& c, const UnitLayout& layout, int layer) {
  const int chunks = head_chunk_count(c.padded_vocab_size(), layout.head_chunks);
  return (chunks > 1 ? head_chunk_unit(c, chunks - 1) : final_unit(c)) + 1 + layer;
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

// The attention half's views (input_layernorm, q|k|v, o_proj) from parameter `first` of `unit` on,
// and the MLP half's (post_attention_layernorm, gate|up, down_proj): a whole layer's unit holds
// the two in turn, a split layer's each its own.
constexpr int kAttentionParams = 5;
void attention_views(const ParamTable& t, int first, const TensorView& unit, LayerParams& p) {
  const TensorView q = t.view(first + 1, unit), k = t.view(first + 2, unit), v = t.view(first + 3, unit);
  p.input_norm = t.view(first, unit);
  p.qkv_proj = stacked(q, q.shape[0] + k.shape[0] + v.shape[0]);
  p.o_proj = t.view(first + 4, unit);
}
void mlp_views(const ParamTable& t, int first, const TensorView& unit, LayerParams& p) {
  const TensorView gate = t.view(first + 1, unit), up = t.view(first + 2, unit);
  p.post_norm = t.view(first, unit);
  p.gate_up_proj = stacked(gate, gate.shape[0] + up.shape[0]);
  p.down_proj = t.view(first + 3, unit);
}

}  // namespace

LayerParams layer_views(const ParamTable& t, int layer, const TensorView& unit) {
  const int first = t.first_param(layer_unit(layer));
  LayerParams p;
  attention_views(t, first, unit, p);
  mlp_views(t, first + kAttentionParams, unit, p);
  return p;
}

LayerParams layer_views(const ParamTable& t, const LlamaConfig& c, const UnitLayout& layout, int layer,
                        const TensorView& attn_unit, const TensorView& mlp_unit_view) {
  LayerParams p;
  if (attn_unit.data != nullptr) attention_views(t, t.first_param(layer_unit(layer)), attn_unit, p);
  if (mlp_unit_view.data != nullptr) mlp_views(t, t.first_param(mlp_unit(c, layout, layer)), mlp_unit_view, p);
  return p;
}

FinalParams final_views(const ParamTable& t, const LlamaConfig& c, const TensorView& unit) {
  const std::vector<int>& params = t.units()[static_cast<std::size_t>(final_unit(c))].params;
  return {t.view(params[0], unit), params.size() > 1 ? t.view(params[1], unit) : TensorView{}};
}

TensorView head_chunk_view(const ParamTable& t, const LlamaConfig& c, int chunk, const TensorView& unit) {
  return t.view(t.units().at(static_cast<std::size_t>(head_chunk_unit(c, chunk))).params[0], unit);
}

void init_unit_params(const ParamTable& t, const LlamaConfig& c, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin, std::int64_t end) {
  const ParamTable whole = build_param_table(c);  // the Philox keys: indices of the unchunked table
  for (int part : t.units().at(static_cast<std::size_t>(unit)).params) {
    const ParamSpec& p = t.param(part);
    // Of this part, [lo, hi); plain variables, not a structured binding, which OpenMP's loop below
    // may not capture before C++20 compilers agree (clang 14 refuses it).
    const std::pair<std::int64_t, std::int64_t> range = elements_in_range(p, begin, end);
    const std::int64_t lo = range.first, hi = range.second;
    if (lo >= hi) continue;
    const int index = whole.index_of(p.name);
    const std::int64_t first = p.row_offset * (p.shape.size() > 1 ? p.shape[1] : 1);  // in the whole tensor
    float* data = unit_data + p.offset;
    if (p.name.ends_with("norm.weight")) {  // RMSNorm gains
      std::fill(data + lo, data + hi, 1.0f);
      continue;
    }
    // Only the true rows are drawn; padded vocabulary rows stay zero and never receive gradient.
    std::int64_t live = 1;
    for (std::int64_t d : p.hf_shape) live *= d;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = lo; i < hi; ++i) {
      data[i] = i < live ? static_cast<float>(0.02 * philox_normal(seed, static_cast<std::uint32_t>(index),
                                                                   static_cast<std::uint64_t>(first + i)))
                         : 0.0f;
    }
  }
}

}  // namespace zt::llama
