// GPT-2 model hyper-parameters (nanoGPT's key names) and the LM head's vocabulary chunks.
#pragma once

#include <cstdint>
#include <string>

#include "models/checkpoint_policy.h"

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
  // A row of the qkv projection's output, which the key/value cache keeps per position and layer.
  std::int64_t qkv_width() const { return 3 * std::int64_t{n_embd}; }
};

// The LM head in `chunks` vocabulary chunks (train.head_chunks; models/head_chunks.h on Vp).
std::int64_t head_chunk_columns(const GptConfig& c, int chunks);
// How many chunks that makes: ceil(Vp / head_chunk_columns).
int head_chunk_count(const GptConfig& c, int chunks);

using zt::CheckpointPolicy;  // models/checkpoint_policy.h

}  // namespace zt::gpt
