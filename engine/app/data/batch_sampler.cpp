// Deterministic batch sampling: each global sample index g maps to one window of T+1 tokens
// (TokenCorpus::place), so batches depend on nothing but (order, seed, stream, sample index) --
// not on ranks, threads or where a run resumed.
#include "engine/app/data/batch_sampler.h"

#include <cmath>
#include <vector>

#include "engine/base/core/check.h"

namespace zt::data {

void fill_batch(const TokenCorpus& corpus, const SampleStream& how, int B, int T, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets) {
  ZT_CHECK(B > 0 && T > 0, "B {} T {}", B, T);
  for (int b = 0; b < B; ++b) {
    const WindowPlace w = corpus.place(how.order, how.seed, how.stream, first_sample + b, T);
    corpus.read_window(w, T, inputs + static_cast<std::int64_t>(b) * T, targets + static_cast<std::int64_t>(b) * T);
  }
}

void fill_batch(TokenSpan tokens, int B, int T, std::uint64_t seed, std::uint32_t stream, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets) {
  ZT_CHECK(tokens.size() > T, "{} tokens for windows of {}", tokens.size(), T + 1);
  fill_batch(TokenCorpus(tokens), {SampleOrder::kRandom, seed, stream}, B, T, first_sample, inputs, targets);
}

void check_samples(const TokenCorpus& corpus, const SampleStream& how, int T, std::int64_t first_sample,
                   std::int64_t count) {
  for (std::int64_t g = first_sample; g < first_sample + count; ++g) {
    corpus.read_window(corpus.place(how.order, how.seed, how.stream, g, T), T, nullptr, nullptr);
  }
}

double unigram_entropy_nats(const TokenCorpus& corpus, int vocab_size, std::int64_t sample_tokens) {
  ZT_CHECK(vocab_size > 0, "vocab_size {}", vocab_size);
  return unigram_entropy_nats(corpus.token_counts(vocab_size, sample_tokens));
}

double unigram_entropy_nats(const std::vector<std::int64_t>& counts) {
  double n = 0.0;
  for (std::int64_t c : counts) n += static_cast<double>(c);
  if (n == 0.0) return 0.0;
  double h = 0.0;
  for (std::int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  }
  return h;
}

}  // namespace zt::data
