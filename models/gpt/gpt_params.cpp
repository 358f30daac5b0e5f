// GPT-2 parameter table, unit views and initialisation.
#include "models/gpt/gpt_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"

namespace zt::gpt {

ParamTable build_param_table(const GptConfig& c, const UnitLayout& layout) {
  const std::int64_t C = c.n_embd, V = c.vocab_size, Vp = c.padded_vocab_size();
  const std::int64_t Vc = head_chunk_columns(c, layout.head_chunks);
  ZT_CHECK(layout.block_units == 1 || layout.block_units == 2, "block_units {} is 1 or 2", layout.block_units);
  const bool split = layout.block_units == 2;
  ParamTable t;
  // wte's rows [first, first + rows) of the Vp stored rows, of which those below V are Hugging Face's.
  auto add_wte_rows = [&](std::int64_t first) {
    const std::int64_t rows = std::min(Vc, Vp - first), live = std::clamp<std::int64_t>(V - first, 0, rows);
    t.add_param("transformer.wte.weight", {rows, C}, {live, C}, true, first);
  };
  t.add_unit("embeddings");
  add_wte_rows(0);
  t.add_param("transformer.wpe.weight", {c.block_size, C}, {c.block_size, C}, true);
  auto add_half = [&](int l, bool mlp) {
    const std::string p = fmt::format("transformer.h.{}.", l);
    auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decays) {
      t.add_param(p + name, shape, shape, decays);
    };
    if (!mlp) {
      add("ln_1.weight", {C}, false);
      add("ln_1.bias", {C}, false);
      add("attn.c_attn.weight", {C, 3 * C}, true);
      add("attn.c_attn.bias", {3 * C}, false);
      add("attn.c_proj.weight", {C, C}, true);
      add("attn.c_proj.bias", {C}, false);
    } else {
      add("ln_2.weight", {C}, false);
      add("ln_2.bias", {C}, false);
      add("mlp.c_fc.weight", {C, 4 * C}, true);
      add("mlp.c_fc.bias", {4 * C}, false);
      add("mlp.c_proj.weight", {4 * C, C}, true);
      add("mlp.c_proj.bias", {C}, false);
    }
  };
  for (int l = 0; l < c.n_layer; ++l) {
    t.add_unit(split ? fmt::format("h.{}.attn", l) : fmt::format("h.{}", l));
    add_half(l, false);
    if (!split) add_half(l, true);
  }
  t.add_unit("final");
  t.add_param("transformer.ln_f.weight", {C}, {C}, false);
  t.add_param("transformer.ln_f.bias", {C}, {C}, false);
  for (std::int64_t first = Vc; first < Vp; first += Vc) {
    t.add_unit(fmt::format("wte.{}", first / Vc));
    add_wte_rows(first);
  }
  for (int l = 0; split && l < c.n_layer; ++l) {
    t.add_unit(fmt::format("h.{}.mlp", l));
    add_half(l, true);
  }
  return t;
}

EmbeddingParams embedding_views(const ParamTable& t, const TensorView& unit) {
  const int first = t.units()[embedding_unit()].params[0];
  return {t.view(first, unit), t.view(first + 1, unit)};
}

namespace {

// The attention half's views (ln_1, c_attn, attn.c_proj) from parameter `first` of `unit` on, and
// the MLP half's (ln_2, c_fc, mlp.c_proj): a whole block's unit holds the two in turn, a split
// block's each its own.
constexpr int kAttentionParams = 6;
void attention_views(const ParamTable& t, int first, const TensorView& unit, BlockParams& p) {
  p.ln_1_w = t.view(first, unit), p.ln_1_b = t.view(first + 1, unit);
  p.c_attn_w = t.view(first + 2, unit), p.c_attn_b = t.view(first + 3, unit);
  p.attn_proj_w = t.view(first + 4, unit), p.attn_proj_b = t.view(first + 5, unit);
}
void mlp_views(const ParamTable& t, int first, const TensorView& unit, BlockParams& p) {
  p.ln_2_w = t.view(first, unit), p.ln_2_b = t.view(first + 1, unit);
  p.c_fc_w = t.view(first + 2, unit), p.c_fc_b = t.view(first + 3, unit);
  p.mlp_proj_w = t.view(first + 4, unit), p.mlp_proj_b = t.view(first + 5, unit);
}

}  // namespace

BlockParams block_views(const ParamTable& t, int layer, const TensorView& unit) {
  const int first = t.first_param(block_unit(layer));
  BlockParams p;
  attention_views(t, first, unit, p);
  mlp_views(t, first + kAttentionParams, unit, p);
  return p;
}

BlockParams block_views(const ParamTable& t, const GptConfig& c, const UnitLayout& layout, int layer,
                        const TensorView& attn_unit, const TensorView& mlp_unit_view) {
  BlockParams p;
  if (attn_unit.data != nullptr) attention_views(t, t.first_param(block_unit(layer)), attn_unit, p);
  if (mlp_unit_view.data != nullptr) mlp_views(t, t.first_param(mlp_unit(c, layout, layer)), mlp_unit_view, p);
  return p;
}

FinalParams final_views(const ParamTable& t, const GptConfig& c, const TensorView& unit) {
  const int first = t.units()[static_cast<std::size_t>(final_unit(c))].params[0];
  return {t.view(first, unit), t.view(first + 1, unit)};
}

TensorView wte_chunk_view(const ParamTable& t, const GptConfig& c, int chunk, const TensorView& unit) {
  return t.view(t.units().at(static_cast<std::size_t>(wte_unit(c, chunk))).params[0], unit);
}

void init_unit_params(const ParamTable& t, const GptConfig& c, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin, std::int64_t end) {
  const double residual_std = 0.02 / std::sqrt(2.0 * c.n_layer);
  const ParamTable whole = build_param_table(c);  // the Philox keys: indices of the unchunked table
  for (int part : t.units().at(static_cast<std::size_t>(unit)).params) {
    const ParamSpec& p = t.param(part);
    // Of this part, [lo, hi); plain variables, not a structured binding, which OpenMP's loop below
    // may not capture before C++20 compilers agree (clang 14 refuses it).
    const std::pair<std::int64_t, std::int64_t> range = elements_in_range(p, begin, end);
    const std::int64_t lo = range.first, hi = range.second;
    if (lo >= hi) continue;
    const int index = whole.index_of(p.name);
    std::int64_t row = 1;
    for (std::size_t k = 1; k < p.shape.size(); ++k) row *= p.shape[k];
    const std::int64_t first = p.row_offset * row;  // the part's first element in the whole tensor
    float* data = unit_data + p.offset;
    const bool is_weight = p.name.ends_with(".weight"), is_layernorm = p.name.find(".ln_") != std::string::npos;
    if (is_layernorm || !is_weight) {  // LayerNorm gains 1; biases, LayerNorm's too, 0
      std::fill(data + lo, data + hi, is_layernorm && is_weight ? 1.0f : 0.0f);
      continue;
    }
    const double std_dev = p.name.ends_with("c_proj.weight") ? residual_std : 0.02;
    // Only the true rows are drawn; padded vocabulary rows stay zero and never receive gradient.
    const std::int64_t live = p.hf_shape[0] * (p.hf_shape.size() > 1 ? p.hf_shape[1] : 1);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = lo; i < hi; ++i) {
      data[i] = i < live ? static_cast<float>(std_dev * philox_normal(seed, static_cast<std::uint32_t>(index),
                                                                      static_cast<std::uint64_t>(first + i)))
                         : 0.0f;
    }
  }
}

}  // namespace zt::gpt
