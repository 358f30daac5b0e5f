// The ranges the config sections read their sizes and counts in: wide enough for any run, narrow
// enough that the products of them the run forms (tokens a step, steps times batches) stay in int64.
// Files that carry a model's shape (a checkpoint's manifest, llm.c's model header) are held to them
// too, before anything is sized by them.
#pragma once

namespace zt {

constexpr long long kMaxConfigDim = 1 << 20;          // model widths and lengths, micro_batch, seq_len
constexpr long long kMaxConfigLayersOrHeads = 1024;   // model.n_layer and n_head (n_kv_head)
constexpr long long kMaxConfigVocab = 1 << 24;        // model.vocab_size (llm.c's uint32 token files)
constexpr long long kMaxConfigGradAccum = 1 << 16;    // train.grad_accum, given or derived
constexpr long long kMaxConfigSteps = 1'000'000'000;  // steps and step intervals
// train.global_batch_tokens, given or derived: past int32 (a prediction for 16384 ranks of one
// 131072-token sequence each is 2^31 tokens a step), and a run's tokens in all (max_steps of them:
// tokens seen, sample indices) are held within kMaxRunTokens.
constexpr long long kMaxConfigGlobalBatchTokens = 1LL << 40;
constexpr long long kMaxRunTokens = 1LL << 62;
constexpr int kMaxPredictedRanks = 1 << 24;  // `memory` and `plan --ranks`: both the same

}  // namespace zt
