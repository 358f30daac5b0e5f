// Llama config rules: the SwiGLU width's default and the consistency checks.
#include "models/llama/llama_config.h"

#include <fmt/format.h>

#include "models/llama/llama_rope_scaling.h"

namespace zt::llama {

int default_intermediate_size(int n_embd) {
  constexpr int kMultipleOf = 256;
  const int two_thirds = 2 * (4 * n_embd) / 3;
  return (two_thirds + kMultipleOf - 1) / kMultipleOf * kMultipleOf;
}

int LlamaConfig::hidden() const {
  return intermediate_size > 0 ? intermediate_size : default_intermediate_size(n_embd);
}

std::string llama_config_error(const LlamaConfig& c, std::string_view key_prefix) {
  const std::string_view p = key_prefix;
  if (c.n_layer < 1 || c.n_head < 1 || c.n_kv_head < 1 || c.n_embd < 1 || c.block_size < 1 || c.vocab_size < 1) {
    return fmt::format(
        "{0}n_layer, {0}n_head, {0}n_kv_head, {0}n_embd, {0}block_size and {0}vocab_size must be positive", p);
  }
  if (c.n_embd % c.n_head != 0) {
    return fmt::format("{0}n_embd = {1} is not divisible by {0}n_head = {2}", p, c.n_embd, c.n_head);
  }
  if (c.n_head % c.n_kv_head != 0) {
    return fmt::format("{0}n_head = {1} is not a multiple of {0}n_kv_head = {2}", p, c.n_head, c.n_kv_head);
  }
  if (c.head_size() % 2 != 0) {
    return fmt::format("the head size {0}n_embd / {0}n_head = {1} must be even for RoPE", p, c.head_size());
  }
  if (c.intermediate_size < 0) return fmt::format("{}intermediate_size = {} is negative", p, c.intermediate_size);
  if (!(c.rope_theta > 0.0f)) return fmt::format("{}rope_theta = {} must be positive", p, c.rope_theta);
  if (!(c.norm_eps > 0.0f)) return fmt::format("{}norm_eps = {} must be positive", p, c.norm_eps);
  return rope_scaling_error(c.rope_scaling, p);
}

}  // namespace zt::llama
