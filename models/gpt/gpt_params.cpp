// GPT-2 parameter table, unit views and initialisation.
#include "models/gpt/gpt_params.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "engine/core/check.h"
#include "engine/core/philox.h"

namespace zt::gpt {

ParamTable build_param_table(const GptConfig& c) {
  const std::int64_t C = c.n_embd, V = c.vocab_size, Vp = c.padded_vocab_size();
  ParamTable t;
  t.add_unit("embeddings");
  t.add_param("transformer.wte.weight", {Vp, C}, {V, C}, true);
  t.add_param("transformer.wpe.weight", {c.block_size, C}, {c.block_size, C}, true);
  for (int l = 0; l < c.n_layer; ++l) {
    t.add_unit(fmt::format("h.{}", l));
    const std::string p = fmt::format("transformer.h.{}.", l);
    auto add = [&](const char* name, std::vector<std::int64_t> shape, bool decays) {
      t.add_param(p + name, shape, shape, decays);
    };
    add("ln_1.weight", {C}, false);
    add("ln_1.bias", {C}, false);
    add("attn.c_attn.weight", {C, 3 * C}, true);
    add("attn.c_attn.bias", {3 * C}, false);
    add("attn.c_proj.weight", {C, C}, true);
    add("attn.c_proj.bias", {C}, false);
    add("ln_2.weight", {C}, false);
    add("ln_2.bias", {C}, false);
    add("mlp.c_fc.weight", {C, 4 * C}, true);
    add("mlp.c_fc.bias", {4 * C}, false);
    add("mlp.c_proj.weight", {4 * C, C}, true);
    add("mlp.c_proj.bias", {C}, false);
  }
  t.add_unit("final");
  t.add_param("transformer.ln_f.weight", {C}, {C}, false);
  t.add_param("transformer.ln_f.bias", {C}, {C}, false);
  return t;
}

EmbeddingParams embedding_views(const ParamTable& t, const TensorView& unit) {
  const int first = t.units()[embedding_unit()].params[0];
  return {t.view(first, unit), t.view(first + 1, unit)};
}

BlockParams block_views(const ParamTable& t, int layer, const TensorView& unit) {
  const int i = t.units()[static_cast<std::size_t>(block_unit(layer))].params[0];
  return {t.view(i + 0, unit), t.view(i + 1, unit), t.view(i + 2, unit),  t.view(i + 3, unit),
          t.view(i + 4, unit), t.view(i + 5, unit), t.view(i + 6, unit),  t.view(i + 7, unit),
          t.view(i + 8, unit), t.view(i + 9, unit), t.view(i + 10, unit), t.view(i + 11, unit)};
}

FinalParams final_views(const ParamTable& t, const GptConfig& c, const TensorView& unit) {
  const int first = t.units()[static_cast<std::size_t>(final_unit(c))].params[0];
  return {t.view(first, unit), t.view(first + 1, unit)};
}

void init_unit_params(const ParamTable& t, const GptConfig& c, int unit, std::uint64_t seed, float* unit_data) {
  const double residual_std = 0.02 / std::sqrt(2.0 * c.n_layer);
  for (int index : t.units().at(static_cast<std::size_t>(unit)).params) {
    const ParamSpec& p = t.param(index);
    float* data = unit_data + p.offset;
    const bool is_weight = p.name.ends_with(".weight");
    if (p.name.find(".ln_") != std::string::npos) {  // LayerNorm: gain 1, bias 0
      for (std::int64_t i = 0; i < p.numel; ++i) data[i] = is_weight ? 1.0f : 0.0f;
      continue;
    }
    if (!is_weight) {
      std::memset(data, 0, static_cast<std::size_t>(p.numel) * sizeof(float));
      continue;
    }
    const double std_dev = p.name.ends_with("c_proj.weight") ? residual_std : 0.02;
    // Only the true rows are drawn; padded vocabulary rows stay zero and never receive gradient.
    const std::int64_t live = p.hf_shape[0] * (p.hf_shape.size() > 1 ? p.hf_shape[1] : 1);
    for (std::int64_t i = 0; i < p.numel; ++i) {
      data[i] = i < live ? static_cast<float>(std_dev * philox_normal(seed, static_cast<std::uint32_t>(index),
                                                                      static_cast<std::uint64_t>(i)))
                         : 0.0f;
    }
  }
}

}  // namespace zt::gpt
