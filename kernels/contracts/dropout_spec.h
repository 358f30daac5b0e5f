// The dropout contract every backend keeps: which elements a dropout keeps (a pure function of the
// run's seed, the site, the global sample and the element, [Note: dropout masks]), how kept values
// are scaled, and the operand checks of every dropout kernel. The CPU kernels (kernels/cpu/dropout)
// and their CUDA twins (kernels/cuda/dropout_mask.cuh) generate the same masks from it.
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"

namespace zt {

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

namespace dropout_rules {

// Philox blocks a mask generator may draw past a sample's last element (the CPU's batches of 16
// blocks); check_spec keeps the last one within the 32-bit block counter.
constexpr std::int64_t kMaxBlocksPastEnd = 16;

// Whether a sample of `elems_per_sample` elements fits the 32-bit Philox block counter (a config
// with dropout is refused where its attention probabilities do not).
bool mask_fits_counter(std::int64_t elems_per_sample);

// Checks p in [0, 1) and, where p > 0, that `elems_per_sample` elements fit the 32-bit Philox block
// counter.
void check_spec(const DropoutSpec& spec, std::int64_t elems_per_sample);

// A dropout's operands as samples: `samples` rows (in's leading dimension) of `per_sample` elements.
struct MaskRows {
  std::int64_t samples, per_sample;
};
// The operand checks every dropout kernel (CPU and CUDA) makes, `what` naming the op: out and in
// of one dtype (F32 or BF16) and element count, a leading sample dimension, and check_spec over a
// sample.
MaskRows check_operands(const TensorView& out, const TensorView& in, const DropoutSpec& spec, const char* what);

// round(p * 2^32), saturated to 2^32 - 1: element kept iff its 32 random bits are >= this.
std::uint32_t keep_threshold(float p);

// 1 / (1 - p) rounded once to fp32: the factor kept elements are multiplied by.
float keep_scale(float p);

}  // namespace dropout_rules

}  // namespace zt
