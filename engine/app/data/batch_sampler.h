// Deterministic batches: global sample g (numbered across every micro-batch of every step of the
// run, and across ranks) reads the window of T+1 tokens starting at a position drawn from Philox
// at (seed, stream, g). A run is therefore a pure function of (seed, sample index): it resumes at
// exactly the same position and splits across ranks by giving each a disjoint range of g.
#pragma once

#include <cstdint>

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

// Start of sample g's window, uniform in [0, n_tokens - T - 1]. Requires n_tokens > T.
std::int64_t sample_window_start(std::uint64_t seed, std::uint32_t stream, std::int64_t sample, std::int64_t n_tokens,
                                 int T);

// Fills inputs/targets [B, T] (i32) with samples first_sample .. first_sample + B - 1.
void fill_batch(TokenSpan tokens, int B, int T, std::uint64_t seed, std::uint32_t stream, std::int64_t first_sample,
                std::int32_t* inputs, std::int32_t* targets);

// Entropy in nats of the token frequency distribution (what a model that ignores context achieves).
double unigram_entropy_nats(TokenSpan tokens, int vocab_size);

}  // namespace zt::data
