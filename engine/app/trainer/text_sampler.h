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

// `model` must be built for batch 1 (any seq_len). The context is the last seq_len tokens; since
// attention is causal, the logits at the last real position ignore the padding after it.
std::vector<std::int32_t> generate_tokens(LanguageModel& model, ParamStore& store, std::vector<std::int32_t> prompt,
                                          const SamplingOptions& options);

}  // namespace zt
