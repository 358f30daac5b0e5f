// The ranges the config sections read their sizes and counts in: wide enough for any run, narrow
// enough that the products of them the run forms (tokens a step, steps times batches) stay in int64.
#pragma once

namespace zt {

constexpr long long kMaxConfigDim = 1 << 20;          // model widths and lengths, micro_batch, seq_len
constexpr long long kMaxConfigGradAccum = 1 << 16;    // train.grad_accum, given or derived
constexpr long long kMaxConfigSteps = 1'000'000'000;  // steps and step intervals
constexpr int kMaxPredictedRanks = 1 << 24;           // `memory` and `plan --ranks`: both the same

}  // namespace zt
