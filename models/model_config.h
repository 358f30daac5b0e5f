// The model section of a run config or a checkpoint manifest, whichever the family: the keys every
// family has, and the family's own keys as it resolved them (defaults filled in, checked). Only the
// family reads its own keys (models/model_family.h); config, checkpoints, export and memory carry
// them through unread.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace zt {

// The family of a config or manifest that names none (GPT-2, the first one zerotrain trained).
inline constexpr std::string_view kDefaultModelFamily = "gpt2";

struct ModelConfig {
  std::string arch{kDefaultModelFamily};  // model.arch: the registered family's name
  int n_layer = 2;
  int n_head = 2;
  int n_embd = 64;
  int block_size = 64;  // maximum sequence length
  int vocab_size = 65;  // true vocabulary size
  // The family's own keys, resolved: what config.json and the manifest write back, so a reload or
  // a resume sees the same values (Llama's SwiGLU width as a number, not its rule).
  nlohmann::json family_keys = nlohmann::json::object();
  // Those of family_keys the family derived from other keys (Llama's n_kv_head from n_head, its
  // SwiGLU width from n_embd): a run's config.json names them in "derived", so that given again
  // with another n_head or n_embd it derives them again rather than keeping the first model's.
  std::vector<std::string> derived_family_keys = {};

  // The vocabulary every family computes with: padded to a multiple of 64 for aligned products.
  int padded_vocab_size() const { return (vocab_size + 63) / 64 * 64; }
  int head_size() const { return n_embd / n_head; }
};

// The keys every family has, into a family's own config type (which names them alike).
template <class FamilyConfig>
void copy_shared_keys(const ModelConfig& from, FamilyConfig& to) {
  to.n_layer = from.n_layer;
  to.n_head = from.n_head;
  to.n_embd = from.n_embd;
  to.block_size = from.block_size;
  to.vocab_size = from.vocab_size;
}

}  // namespace zt
