// Deterministic batch sampling: each global sample index g maps, through Philox at
// (seed, stream, g), to one window of T+1 tokens, so batches depend on nothing but
// (seed, stream, sample index) -- not on ranks, threads or where a run resumed.
#include "engine/app/data/batch_sampler.h"

#include <cmath>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/base/core/philox.h"

namespace zt::data {

std::int64_t sample_window_start(std::uint64_t seed, std::uint32_t stream, std::int64_t sample, std::int64_t n_tokens,
                                 int T) {
  ZT_CHECK(T > 0 && n_tokens > T, "n_tokens {} T {}", n_tokens, T);
  ZT_CHECK(sample >= 0, "sample {}", sample);
  const auto g = static_cast<std::uint64_t>(sample);
  const auto r = philox4x32({static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32), stream, 0u},
                            {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const std::uint64_t bits = static_cast<std::uint64_t>(r[0]) | (static_cast<std::uint64_t>(r[1]) << 32);
  // The modulo bias is below (n_tokens - T) / 2^64: negligible for any real file.
  return static_cast<std::int64_t>(bits % static_cast<std::uint64_t>(n_tokens - T));
}

void fill_batch(TokenSpan tokens, int B, int T, std::uint64_t seed, std::uint32_t stream, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets) {
  ZT_CHECK(B > 0 && T > 0, "B {} T {}", B, T);
  const auto n_tokens = static_cast<std::int64_t>(tokens.size());
  for (int b = 0; b < B; ++b) {
    const std::int64_t start = sample_window_start(seed, stream, first_sample + b, n_tokens, T);
    std::int32_t* in_row = inputs + static_cast<std::int64_t>(b) * T;
    std::int32_t* tgt_row = targets + static_cast<std::int64_t>(b) * T;
    for (int t = 0; t < T; ++t) {
      in_row[t] = static_cast<std::int32_t>(tokens[start + t]);
      tgt_row[t] = static_cast<std::int32_t>(tokens[start + t + 1]);
    }
  }
}

double unigram_entropy_nats(TokenSpan tokens, int vocab_size) {
  ZT_CHECK(vocab_size > 0, "vocab_size {}", vocab_size);
  if (tokens.empty()) return 0.0;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab_size), 0);
  for (std::uint32_t t : tokens) {
    ZT_CHECK(t < static_cast<std::uint32_t>(vocab_size), "token {} outside vocabulary of {}", t, vocab_size);
    ++counts[t];
  }
  const auto n = static_cast<double>(tokens.size());
  double h = 0.0;
  for (std::int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  }
  return h;
}

}  // namespace zt::data
