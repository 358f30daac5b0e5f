// Autoregressive sampling over a fixed-length causal window.
#include "engine/app/trainer/text_sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"

namespace zt {

int sampling_window(std::size_t prompt_tokens, int new_tokens, int limit) {
  const std::int64_t needed = std::max<std::int64_t>(1, static_cast<std::int64_t>(prompt_tokens)) + new_tokens;
  return static_cast<int>(std::clamp<std::int64_t>(needed, 1, std::max(1, limit)));
}

std::vector<std::int32_t> generate_tokens(LanguageModel& model, ParamStore& store, std::vector<std::int32_t> tokens,
                                          const SamplingOptions& options) {
  const int T = model.seq_len();
  const int V = options.vocab_limit > 0 ? std::min(options.vocab_limit, model.vocab_size()) : model.vocab_size();
  const int row_stride = model.vocab_size();
  ZT_CHECK(model.batch() == 1, "sampling runs on a batch-1 model");
  if (tokens.empty()) tokens.push_back(0);
  std::vector<std::int32_t> window(static_cast<std::size_t>(T)), dummy_targets(static_cast<std::size_t>(T), 0);
  std::vector<float> logits(static_cast<std::size_t>(T) * row_stride);
  std::vector<std::pair<float, int>> ranked(static_cast<std::size_t>(V));
  std::vector<double> probs(static_cast<std::size_t>(V));
  const std::size_t prompt_len = tokens.size();
  for (int n = 0; n < options.max_new_tokens; ++n) {
    const int used = static_cast<int>(std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(T)));
    std::fill(window.begin(), window.end(), 0);
    std::copy(tokens.end() - used, tokens.end(), window.begin());
    model.forward(store, window.data(), dummy_targets.data(), {.training = false, .logits_out = logits.data()});
    const float* row = logits.data() + static_cast<std::size_t>(used - 1) * row_stride;

    for (int v = 0; v < V; ++v) ranked[static_cast<std::size_t>(v)] = {row[v], v};
    const int k = options.top_k > 0 ? std::min(options.top_k, V) : V;
    std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    double total = 0.0;
    for (int i = 0; i < k; ++i) {
      probs[static_cast<std::size_t>(i)] = std::exp((ranked[static_cast<std::size_t>(i)].first - ranked[0].first) /
                                                    static_cast<double>(options.temperature));
      total += probs[static_cast<std::size_t>(i)];
    }
    const std::uint64_t position = tokens.size();
    const auto r =
        philox4x32({static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(position >> 32), 0x5A3Du, 0u},
                   {static_cast<std::uint32_t>(options.seed), static_cast<std::uint32_t>(options.seed >> 32)});
    double u = uint_to_unit_open(r[0]) * total;
    int chosen = ranked[static_cast<std::size_t>(k - 1)].second;
    for (int i = 0; i < k; ++i) {
      u -= probs[static_cast<std::size_t>(i)];
      if (u <= 0.0) {
        chosen = ranked[static_cast<std::size_t>(i)].second;
        break;
      }
    }
    tokens.push_back(chosen);
  }
  model.release_activations();
  return std::vector<std::int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len), tokens.end());
}

}  // namespace zt
