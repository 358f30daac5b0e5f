// Text generation from a model: autoregressive sampling with temperature and top-k, each draw
// from Philox at (seed, position) so a sample is reproducible, or greedy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/sharding/param_store.h"
#include "models/language_model.h"

namespace zt {

struct SamplingOptions {
  int max_new_tokens = 200;
  float temperature = 0.8f;
  // 0: sample from the whole distribution. Tokens tied with the k-th most likely stay in, as in
  // transformers' top-k (it removes only those below the k-th logit).
  int top_k = 40;
  std::uint64_t seed = 0;
  int vocab_limit = 0;   // > 0: only tokens below it are drawn (the dataset's vocabulary)
  bool kv_cache = true;  // false: every draw runs the whole window (sample_tokens), for comparison
  // Called with each token as it is drawn (`zerotrain sample` prints the text as it comes); the
  // tokens returned are the same.
  std::function<void(std::int32_t)> on_token = {};
  // Asked before each draw after the first: true ends the sample there, returning the tokens
  // drawn so far (`zerotrain sample` on Ctrl-C).
  std::function<bool()> stop_requested = {};
  // The most likely token each time, the lowest id among ties, no draw (temperature and top_k
  // aside): `zerotrain sample --temperature 0`.
  bool greedy = false;
  // < 1: then only the most likely tokens while the probability before each is under it (nucleus
  // sampling, after top-k, as transformers orders them); 1 keeps every token top-k kept.
  float top_p = 1.0f;
  // Non-empty: only the ids it marks true are drawn (a tokenizer's, whose ids skip numbers: a draw
  // of an id it has no token for decoded to nothing). Greedy decoding too.
  std::vector<bool> drawable = {};
  // Set: a row of logits that is not finite is not thrown for (NonFiniteLogitsError); the first
  // one's description is kept here and the lowest drawable id drawn in its place, so that the sample
  // makes the forwards and votes it would have made. A trainer's ranks then agree on it (their
  // logits may differ in the last bits, and whether one overflows with them).
  std::string* nonfinite_seen = nullptr;
};

// What TokenDraw throws where a logit is NaN or infinite: a run's periodic sample records it and
// trains on, where `zerotrain sample` fails with it.
class NonFiniteLogitsError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// One token from one row of logits: softmax at the temperature over the top k (and their ties) and
// the top-p nucleus of those, drawn from Philox at (seed, the position the token will take), so a
// sample is reproducible; or the argmax where greedy. NonFiniteLogitsError naming the position
// where a logit is NaN or infinite (a draw from those is garbage: every probability NaN), unless
// SamplingOptions::nonfinite_seen records it.
class TokenDraw {
 public:
  TokenDraw(const SamplingOptions& options, int model_vocab);
  std::int32_t operator()(const float* row, std::uint64_t position);

 private:
  std::int32_t pick(const float* row, std::uint64_t position);

  const SamplingOptions& options_;
  int V_;
  std::vector<int> ids_;  // the ids drawn from: below V_, and drawable where options say
  std::vector<std::pair<float, int>> ranked_;
  std::vector<double> probs_;
};

// The window a sampling model is built for: the prompt (at least the one token an empty prompt
// starts from) and the tokens drawn after it, at most `limit` (the model's context or the run's
// seq_len), beyond which the window slides. Every draw runs the whole window, and a pretrained
// Llama 3's context is 131072 positions: built that wide, one sample would ask hundreds of GiB of
// activations. As attention is causal, the logits at the last real position are those of any
// wider window.
int sampling_window(std::size_t prompt_tokens, int new_tokens, int limit);

// Builds a batch-1 sampling model for forwards of `seq_len` tokens.
using SamplingModelBuilder = std::function<std::unique_ptr<LanguageModel>(int seq_len)>;

// What the trainer and `zerotrain sample` call: the tokens drawn after `prompt`, attending to at
// most `limit` positions. Where the model keeps a key/value cache, the draws whose context fits
// the limit go through it (generate_tokens_cached's way), and only those past it run the sliding
// window; without a cache (a family that keeps none, options.kv_cache off, a prompt longer than
// the limit) every draw runs generate_tokens on a model built for sampling_window's length.
std::vector<std::int32_t> sample_tokens(const SamplingModelBuilder& build, ParamStore& store,
                                        std::vector<std::int32_t> prompt, const SamplingOptions& options, int limit);

// Every draw runs the whole window: `model` must be built for batch 1 (any seq_len). The context is
// the last seq_len tokens; since attention is causal, the logits at the last real position ignore
// the padding after it. Each draw costs a forward of seq_len tokens.
std::vector<std::int32_t> generate_tokens(LanguageModel& model, ParamStore& store, std::vector<std::int32_t> prompt,
                                          const SamplingOptions& options);

// The prompt's forward once, then each drawn token's alone, their keys and values kept in a cache
// (ForwardOptions::kv_cache): a model built for the prompt's length, then one for a single token,
// in turn. The same draws as generate_tokens, up to the rounding of products over fewer rows.
// The prompt and the draws must fit the model's context, and the model must keep a cache.
std::vector<std::int32_t> generate_tokens_cached(const SamplingModelBuilder& build, ParamStore& store,
                                                 std::vector<std::int32_t> prompt, const SamplingOptions& options);

}  // namespace zt
