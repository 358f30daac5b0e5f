// GPT-2 model hyper-parameters (nanoGPT's key names) and the activation-checkpointing policy.
#pragma once

#include <cstdint>
#include <string>

namespace zt::gpt {

struct GptConfig {
  int n_layer = 2;
  int n_head = 2;
  int n_embd = 64;
  int block_size = 64;  // maximum sequence length (rows of the position embedding)
  int vocab_size = 65;  // true vocabulary size

  // The vocabulary the model computes with, padded to a multiple of 64 for aligned matrix
  // products; padded logits never contribute (see kernels/cpu/cross_entropy.h).
  int padded_vocab_size() const { return (vocab_size + 63) / 64 * 64; }
  int head_size() const { return n_embd / n_head; }
};

// Which transformer blocks recompute their forward in backward instead of keeping activations.
struct CheckpointPolicy {
  enum class Kind { kNone, kAll, kEvery };
  Kind kind = Kind::kNone;
  int every_k = 1;  // with kEvery: blocks 0, k, 2k, ... are checkpointed

  bool is_checkpointed(int layer) const {
    switch (kind) {
      case Kind::kNone: return false;
      case Kind::kAll: return true;
      case Kind::kEvery: return layer % every_k == 0;
    }
    return false;
  }
  // "none", "all" or "every:K": the config's spelling.
  std::string to_string() const;
  // Parses that spelling; returns false when it is not one of them.
  static bool parse(const std::string& text, CheckpointPolicy* out);
};

}  // namespace zt::gpt
