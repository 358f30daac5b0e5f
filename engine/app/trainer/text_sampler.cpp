// Autoregressive sampling, over a fixed-length causal window or through a key/value cache.
#include "engine/app/trainer/text_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"

namespace zt {

namespace {

bool stopping(const SamplingOptions& options) { return options.stop_requested && options.stop_requested(); }

// generate_tokens_cached's loop: `model` built for the prompt's length (at least one token), `cache`
// of the prompt's and every draw's positions but the last.
std::vector<std::int32_t> decode_cached(std::unique_ptr<LanguageModel> model, KvCache& cache,
                                        const SamplingModelBuilder& build, ParamStore& store,
                                        std::vector<std::int32_t> tokens, const SamplingOptions& options) {
  const std::size_t prompt_len = tokens.size();
  ZT_CHECK(model->batch() == 1 && model->seq_len() == static_cast<int>(prompt_len) && options.max_new_tokens > 0 &&
               cache.length() == 0 && cache.capacity() >= static_cast<std::int64_t>(prompt_len),
           "decoding: a batch-1 model for the {}-token prompt and an empty cache", prompt_len);
  const int row_stride = model->vocab_size();
  TokenDraw draw(options, row_stride);
  std::vector<std::int32_t> dummy_targets(prompt_len, 0);
  std::vector<float> logits(prompt_len * static_cast<std::size_t>(row_stride));
  const ForwardOptions decode{.training = false, .logits_out = logits.data(), .kv_cache = &cache};
  model->forward(store, tokens.data(), dummy_targets.data(), decode);
  model->release_activations();
  tokens.push_back(draw(logits.data() + (prompt_len - 1) * static_cast<std::size_t>(row_stride), tokens.size()));
  if (options.max_new_tokens > 1) {
    model.reset();  // the prompt's activations and scratch go before the step model's come
    model = build(1);
    for (int n = 1; n < options.max_new_tokens && !stopping(options); ++n) {
      model->forward(store, &tokens.back(), dummy_targets.data(), decode);
      tokens.push_back(draw(logits.data(), tokens.size()));
    }
    model->release_activations();
  }
  return std::vector<std::int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len), tokens.end());
}

}  // namespace

TokenDraw::TokenDraw(const SamplingOptions& options, int model_vocab)
    : options_(options), V_(options.vocab_limit > 0 ? std::min(options.vocab_limit, model_vocab) : model_vocab) {
  for (int v = 0; v < V_; ++v) {
    const bool drawable =
        options.drawable.empty() || (static_cast<std::size_t>(v) < options.drawable.size() && options.drawable[v]);
    if (drawable) ids_.push_back(v);
  }
  if (ids_.empty()) {  // nothing it marks below the limit: every id, as without it
    for (int v = 0; v < V_; ++v) ids_.push_back(v);
  }
  ranked_.resize(ids_.size());
  probs_.resize(ids_.size());
}

std::int32_t TokenDraw::operator()(const float* row, std::uint64_t position) {
  const std::int32_t token = pick(row, position);
  if (options_.on_token) options_.on_token(token);
  return token;
}

std::int32_t TokenDraw::pick(const float* row, std::uint64_t position) {
  for (int v = 0; v < V_; ++v) {
    // Sorting NaNs is undefined and their probabilities are NaN: every draw fell through to one
    // fixed token, silently.
    if (!std::isfinite(row[v])) {
      std::string what = fmt::format(
          "sampling: the model's logits for position {} are not finite (token {}: {}): its forward overflowed",
          position, v, row[v]);
      if (options_.nonfinite_seen == nullptr) throw NonFiniteLogitsError(what);
      if (options_.nonfinite_seen->empty()) *options_.nonfinite_seen = std::move(what);
      return ids_.front();
    }
  }
  for (std::size_t i = 0; i < ids_.size(); ++i) ranked_[i] = {row[ids_[i]], ids_[i]};
  const auto more_likely = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (options_.greedy) return std::min_element(ranked_.begin(), ranked_.end(), more_likely)->second;
  const int n = static_cast<int>(ids_.size());
  int k = options_.top_k > 0 ? std::min(options_.top_k, n) : n;
  std::partial_sort(ranked_.begin(), ranked_.begin() + k, ranked_.end(), more_likely);
  // The tokens tied with the k-th stay in (by id, so the draw does not depend on the partition's
  // order): kept to exactly k, four tokens of one logit at the top of a top-2 drew only the two
  // lowest ids, where transformers draws all four.
  const float kth = ranked_[static_cast<std::size_t>(k - 1)].first;
  const auto tied_end =
      std::partition(ranked_.begin() + k, ranked_.end(), [kth](const auto& e) { return e.first == kth; });
  std::sort(ranked_.begin() + k, tied_end, more_likely);
  k = static_cast<int>(tied_end - ranked_.begin());
  double total = 0.0;
  for (int i = 0; i < k; ++i) {
    probs_[static_cast<std::size_t>(i)] = std::exp((ranked_[static_cast<std::size_t>(i)].first - ranked_[0].first) /
                                                   static_cast<double>(options_.temperature));
    total += probs_[static_cast<std::size_t>(i)];
  }
  if (options_.top_p < 1.0f) {
    // Nucleus: the most likely tokens while the mass before each is under top_p, at least one, as
    // transformers' top-p (after its top-k) keeps them.
    double before = 0.0;
    int kept = 0;
    while (kept < k && (kept == 0 || before < static_cast<double>(options_.top_p) * total)) {
      before += probs_[static_cast<std::size_t>(kept)];
      ++kept;
    }
    k = kept;
    total = before;
  }
  const auto r =
      philox4x32({static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(position >> 32), 0x5A3Du, 0u},
                 {static_cast<std::uint32_t>(options_.seed), static_cast<std::uint32_t>(options_.seed >> 32)});
  double u = uint_to_unit_open(r[0]) * total;
  for (int i = 0; i < k; ++i) {
    u -= probs_[static_cast<std::size_t>(i)];
    if (u <= 0.0) return ranked_[static_cast<std::size_t>(i)].second;
  }
  return ranked_[static_cast<std::size_t>(k - 1)].second;
}

int sampling_window(std::size_t prompt_tokens, int new_tokens, int limit) {
  const std::int64_t needed = std::max<std::int64_t>(1, static_cast<std::int64_t>(prompt_tokens)) + new_tokens;
  return static_cast<int>(std::clamp<std::int64_t>(needed, 1, std::max(1, limit)));
}

std::vector<std::int32_t> sample_tokens(const SamplingModelBuilder& build, ParamStore& store,
                                        std::vector<std::int32_t> prompt, const SamplingOptions& options, int limit) {
  if (prompt.empty()) prompt.push_back(0);
  const std::int64_t fed = static_cast<std::int64_t>(prompt.size());
  std::vector<std::int32_t> drawn;
  // Through the cache, the draws whose context (the prompt and the draws before) fits `limit`: the
  // cache then holds at most `limit` positions, the window's. The window slides for the rest, each
  // of those draws a forward of `limit` tokens, as it would have been anyway.
  if (options.kv_cache && options.max_new_tokens > 0 && fed <= limit) {
    SamplingOptions within = options;
    within.max_new_tokens = static_cast<int>(std::min<std::int64_t>(options.max_new_tokens, limit - fed + 1));
    std::unique_ptr<LanguageModel> model = build(static_cast<int>(fed));
    const std::unique_ptr<KvCache> cache = model->make_kv_cache(fed + within.max_new_tokens - 1);
    if (cache != nullptr) {
      drawn = decode_cached(std::move(model), *cache, build, store, prompt, within);
      // Asked before the window's first draw only, as before each draw after the first: a sample
      // that fit asks as often as it did before, and a trainer counting the asks votes as often.
      if (drawn.size() == static_cast<std::size_t>(options.max_new_tokens) ||
          static_cast<int>(drawn.size()) < within.max_new_tokens || stopping(options)) {
        return drawn;
      }
      prompt.insert(prompt.end(), drawn.begin(), drawn.end());
    }
  }
  SamplingOptions rest = options;
  rest.max_new_tokens = options.max_new_tokens - static_cast<int>(drawn.size());
  const std::unique_ptr<LanguageModel> model = build(sampling_window(prompt.size(), rest.max_new_tokens, limit));
  std::vector<std::int32_t> more = generate_tokens(*model, store, std::move(prompt), rest);
  drawn.insert(drawn.end(), more.begin(), more.end());
  return drawn;
}

std::vector<std::int32_t> generate_tokens(LanguageModel& model, ParamStore& store, std::vector<std::int32_t> tokens,
                                          const SamplingOptions& options) {
  const int T = model.seq_len();
  const int row_stride = model.vocab_size();
  ZT_CHECK(model.batch() == 1, "sampling runs on a batch-1 model");
  if (tokens.empty()) tokens.push_back(0);
  std::vector<std::int32_t> window(static_cast<std::size_t>(T)), dummy_targets(static_cast<std::size_t>(T), 0);
  std::vector<float> logits(static_cast<std::size_t>(T) * row_stride);
  TokenDraw draw(options, model.vocab_size());
  const std::size_t prompt_len = tokens.size();
  for (int n = 0; n < options.max_new_tokens && (n == 0 || !stopping(options)); ++n) {
    const int used = static_cast<int>(std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(T)));
    std::fill(window.begin(), window.end(), 0);
    std::copy(tokens.end() - used, tokens.end(), window.begin());
    model.forward(store, window.data(), dummy_targets.data(), {.training = false, .logits_out = logits.data()});
    tokens.push_back(draw(logits.data() + static_cast<std::size_t>(used - 1) * row_stride, tokens.size()));
  }
  model.release_activations();
  return std::vector<std::int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len), tokens.end());
}

std::vector<std::int32_t> generate_tokens_cached(const SamplingModelBuilder& build, ParamStore& store,
                                                 std::vector<std::int32_t> tokens, const SamplingOptions& options) {
  if (tokens.empty()) tokens.push_back(0);
  if (options.max_new_tokens <= 0) return {};
  std::unique_ptr<LanguageModel> model = build(static_cast<int>(tokens.size()));
  const std::unique_ptr<KvCache> cache =
      model->make_kv_cache(static_cast<std::int64_t>(tokens.size()) + options.max_new_tokens - 1);
  ZT_CHECK(cache != nullptr, "this model keeps no key/value cache");
  return decode_cached(std::move(model), *cache, build, store, std::move(tokens), options);
}

}  // namespace zt
