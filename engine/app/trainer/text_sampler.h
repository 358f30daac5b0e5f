// Text generation from a model: autoregressive sampling with temperature and top-k, each draw
// from Philox at (seed, position) so a sample is reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/distributed/sharding/param_store.h"
#include "models/language_model.h"

namespace zt {

struct SamplingOptions {
  int max_new_tokens = 200;
  float temperature = 0.8f;
  int top_k = 40;  // 0: sample from the whole distribution
  std::uint64_t seed = 0;
  int vocab_limit = 0;  // > 0: only tokens below it are drawn (the dataset's vocabulary)
};

// The window a sampling model is built for: the prompt (at least the one token an empty prompt
// starts from) and the tokens drawn after it, at most `limit` (the model's context or the run's
// seq_len), beyond which the window slides. Every draw runs the whole window, and a pretrained
// Llama 3's context is 131072 positions: built that wide, one sample would ask hundreds of GiB of
// activations. As attention is causal, the logits at the last real position are those of any
// wider window.
int sampling_window(std::size_t prompt_tokens, int new_tokens, int limit);

// `model` must be built for batch 1 (any seq_len). The context is the last seq_len tokens; since
// attention is causal, the logits at the last real position ignore the padding after it.
std::vector<std::int32_t> generate_tokens(LanguageModel& model, ParamStore& store, std::vector<std::int32_t> prompt,
                                          const SamplingOptions& options);

}  // namespace zt
