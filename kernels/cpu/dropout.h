// Dropout with counter-based masks: whether element j of sample g is kept is a pure function of
// (seed, site, g, j) through Philox, so masks are never stored (backward regenerates them) and are
// the same at any number of ranks, any ZeRO stage and after a resume. See [Note: dropout masks].
#pragma once

#include <cstdint>

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// [Note: dropout masks]
// A tensor [B, N...] is seen as B samples of N elements each. Row b is global sample
// first_sample + b (its index in the whole run's stream of samples: the trainer numbers every
// sample of every micro-batch of every step, on every rank, so the same sample gets the same mask
// wherever it is computed). Element j of sample g is kept iff
//   philox4x32(ctr = {j / 4, site, g_lo, g_hi}, key = {seed_lo, seed_hi})[j % 4] >= threshold,
// threshold = round(p * 2^32) (saturated to 2^32-1); kept values are scaled by 1 / (1 - p).
// p == 0 is exactly the identity (no random numbers drawn).
struct DropoutSpec {
  float p = 0.0f;                 // probability of dropping, in [0, 1)
  std::uint64_t seed = 0;         // the run's seed
  std::uint32_t site = 0;         // which dropout site (see dropout_site)
  std::int64_t first_sample = 0;  // global sample index of row 0

  bool active() const { return p > 0.0f; }
};

// Site ids: 0 for the embedding output, then 3 per layer: attention probabilities, attention
// residual branch, MLP residual branch.
enum class DropoutSite : std::uint32_t { kAttentionProbs = 0, kAttentionResidual = 1, kMlpResidual = 2 };
constexpr std::uint32_t kEmbeddingDropoutSite = 0;
constexpr std::uint32_t dropout_site(int layer, DropoutSite s) {
  return 1u + 3u * static_cast<std::uint32_t>(layer) + static_cast<std::uint32_t>(s);
}

// True when element j of sample g is kept (the definition above; used by kernels and tests).
bool dropout_keep(const DropoutSpec& spec, std::int64_t sample, std::int64_t j);

// out = in * mask / (1 - p), in and out [B, ...] with B = in.shape[0] samples (out may alias in).
void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec);

// dinp = dout * mask / (1 - p), the same mask regenerated (dinp may alias dout).
void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec);

}  // namespace zt::cpu
