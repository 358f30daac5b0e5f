// Llama-style decoder hyper-parameters (Hugging Face LlamaConfig's meaning, nanoGPT-style key
// names where GPT-2 has them): no biases, RMSNorm before attention and MLP and at the end, rotary
// position embeddings on q and k, a SwiGLU MLP, grouped-query attention (n_kv_head <= n_head).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/contracts/rope_angles.h"

namespace zt::llama {

struct LlamaConfig {
  int n_layer = 2;
  int n_head = 4;
  int n_kv_head = 2;  // key/value heads; n_head is a multiple of it
  int n_embd = 64;
  int intermediate_size = 0;  // the SwiGLU hidden width; 0: Llama's rule (default_intermediate_size)
  int block_size = 64;        // maximum sequence length (RoPE has no table, so no parameters depend on it)
  int vocab_size = 65;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling{};   // Hugging Face's rope_scaling (Llama 3.1 and later: llama3)
  float norm_eps = 1e-5f;       // RMSNorm epsilon
  bool tie_embeddings = false;  // the LM head shares the token embedding (Llama 3.2 1B does)

  int head_size() const { return n_embd / n_head; }
  // A row of the q, k and v projections' outputs, which the key/value cache keeps per position
  // and layer (the queries too: the projection writes its whole output there).
  std::int64_t qkv_width() const { return std::int64_t{n_head + 2 * n_kv_head} * head_size(); }
  int padded_vocab_size() const { return (vocab_size + 63) / 64 * 64; }
  int hidden() const;  // intermediate_size, or the rule's width when it is 0
  RopeFrequencies rope() const { return {rope_theta, rope_scaling}; }
};

// Llama's rule for the SwiGLU width (Meta's reference model, multiple_of = 256): two thirds of
// 4 n_embd, rounded up to a multiple of 256.
int default_intermediate_size(int n_embd);

// "" when the config is consistent, else what is wrong (for the config reader's one-line error),
// each key named with `key_prefix` before it ("model." in the config reader).
std::string llama_config_error(const LlamaConfig& c, std::string_view key_prefix = "");

}  // namespace zt::llama
