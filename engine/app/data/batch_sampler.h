// Deterministic batches: global sample g (numbered across every micro-batch of every step of the
// run, and across ranks) reads the window of T+1 tokens that TokenCorpus::place gives it in the
// run's order (random: drawn from Philox at (seed, stream, g); sequential: llm.c's walk through
// the shards). A run is therefore a pure function of (seed, sample index): it resumes at exactly
// the same position and splits across ranks by giving each a disjoint range of g.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/app/data/token_corpus.h"
#include "engine/app/data/token_span.h"

namespace zt::data {

constexpr std::uint32_t kTrainStream = 1;
constexpr std::uint32_t kValStream = 2;

// Global sample index of row 0 of a rank's micro-batch: the global batch of each micro-step is
// B * world_size consecutive samples and rank r takes rows [r*B, (r+1)*B) of it, so the ranks'
// samples are disjoint and together are exactly what one process with micro_batch B*N reads.
inline std::int64_t first_sample_index(std::int64_t step, int micro, int grad_accum, int micro_batch, int world_size,
                                       int rank) {
  return (step * grad_accum + micro) * micro_batch * world_size + static_cast<std::int64_t>(rank) * micro_batch;
}

// Which windows a sampler reads, and from where.
struct SampleStream {
  SampleOrder order = SampleOrder::kRandom;
  std::uint64_t seed = 0;
  std::uint32_t stream = kTrainStream;
};

// Fills inputs/targets [B, T] (i32) with samples first_sample .. first_sample + B - 1.
void fill_batch(const TokenCorpus& corpus, const SampleStream& how, int B, int T, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets);
// The same over one span in random order (the single-file case; tests).
void fill_batch(TokenSpan tokens, int B, int T, std::uint64_t seed, std::uint32_t stream, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets);
// Checks the tokens of samples first_sample .. first_sample + count - 1 against the vocabulary
// without copying them: every rank checks the whole global batch before reading its own rows, so
// a bad token stops all ranks at the same step with the same error, before any collective.
void check_samples(const TokenCorpus& corpus, const SampleStream& how, int T, std::int64_t first_sample,
                   std::int64_t count);

// Entropy in nats of the token frequency distribution (what a model that ignores context achieves),
// over the whole corpus up to `sample_tokens`, else over that many in blocks spread across it.
constexpr std::int64_t kEntropySampleTokens = std::int64_t{1} << 26;
double unigram_entropy_nats(const TokenCorpus& corpus, int vocab_size,
                            std::int64_t sample_tokens = kEntropySampleTokens);
// The same from counts already taken (TokenCorpus::token_counts).
double unigram_entropy_nats(const std::vector<std::int64_t>& counts);
inline double unigram_entropy_nats(TokenSpan tokens, int vocab_size) {
  return unigram_entropy_nats(TokenCorpus(tokens), vocab_size);
}

}  // namespace zt::data
