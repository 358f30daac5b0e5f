// What GPT-2's forward keeps for backward, carved out of tracked buffers, and the prediction of
// the activation peak that the memory tracker measures (docs/memory.md derives the formulas).
// Activations are in the run's activation dtype (precision.activations: F32 or BF16, see
// docs/precision.md); row statistics (LayerNorm mean/rstd, log-sum-exps, losses) and token ids are
// 4-byte, in the memory of the context's device.
#pragma once

#include <cstdint>
#include <string>

#include "engine/base/core/buffer.h"
#include "kernels/exec_context.h"
#include "models/gpt/gpt_config.h"

namespace zt::gpt {

struct ActivationDims {
  std::int64_t B, T, C, NH, Vp;
  // Attention through the flash kernels: a block keeps each row's log-sum-exp [B, NH, T] instead
  // of the probabilities [B, NH, T, T] (see activation_dims for when).
  bool flash_attention;
  DType act = DType::kF32;  // activations and activation gradients (precision.activations)
  // The LM head's logits are computed this many vocabulary columns at a time (head_chunk_columns):
  // Vp when they are held whole.
  std::int64_t Vc = 0;
  // Selective activation checkpointing (CheckpointPolicy::selective): a block keeps neither ln_1's
  // nor ln_2's output nor GELU's; they live in the model's RecomputeScratch, written by every
  // block's forward and recomputed there by its backward.
  bool selective = false;
  bool head_chunked() const { return Vc < Vp; }
  int head_chunk_count() const { return static_cast<int>((Vp + Vc - 1) / Vc); }
  std::int64_t BT() const { return B * T; }
  std::int64_t BTC() const { return B * T * C; }
  std::int64_t act_bytes() const { return static_cast<std::int64_t>(dtype_size_bytes(act)); }
};

// The model's dimensions for batches of B x T on `device`. Attention is flash where it can be:
// on CUDA, for the head sizes the flash kernels are compiled for (dropout on the probabilities is
// fused into them); the memory prediction calls this too, so both make the same choice.
ActivationDims activation_dims(const GptConfig& c, std::int64_t batch, std::int64_t seq_len, Device device,
                               DType activations = DType::kF32, int head_chunks = 1, bool selective = false);

// How attention runs and what it keeps, for the memory report and the train command's header.
// Fused (no T x T probabilities kept): on cuDNN, or on the flash kernels (on tensor cores or CUDA
// cores) with why cuDNN does not run it under `choice` (precision.attention), or cuDNN in
// evaluation and flash in training where only dropout on the probabilities (model.dropout > 0)
// keeps cuDNN out (`dropout`: model.dropout > 0). Else "materialised (T x T probabilities kept)" and, on CUDA, why the
// flash kernels could not take it and the probabilities' bytes per block (a head size they are not compiled for
// silently costing B NH T^2 elements a layer would otherwise surprise users).
std::string describe_attention(const GptConfig& c, const ActivationDims& d, Device device,
                               AttentionKernels choice = AttentionKernels::kAuto, bool dropout = false);

// Bytes of one block's internal activations, with a = act_bytes(): a (15 BTC + B NH T^2) + 4 (4 BT)
// materialised, a 15 BTC + 4 (4 BT + B NH T) with flash attention; 9 BTC in place of 15 when
// selective (ln_1's, ln_2's and GELU's outputs are in the RecomputeScratch).
std::int64_t block_activation_bytes(const ActivationDims& d);
// Bytes of the head's activations (ln_f output, its mean/rstd, probabilities, losses):
// a (BTC + BT Vp) + 4 (3 BT); in vocabulary chunks, one chunk's logits, the ln_f output's
// gradient of one chunk, and the rows' max (then log-sum-exp), sum and target logit:
// a (2 BTC + BT Vc) + 4 (6 BT).
std::int64_t head_activation_bytes(const ActivationDims& d);
// Bytes kept for the whole step: the input and target token ids, 4 (2 BT) (token_ids_bytes), then
// the residual stream, a (n_layer + 1) BTC (each block's input -- exactly what a checkpointed
// block keeps -- and the last block's output).
std::int64_t token_ids_bytes(const ActivationDims& d);
std::int64_t residual_stream_bytes(const ActivationDims& d, int n_layer);

// Peak bytes of the activations category over one forward + backward, replaying the model's
// allocation order (see GptModel): residual stream first; per block, its activations (freed at
// once when the block is checkpointed); the head; in backward the head is freed first, then each
// block's activations are freed after its backward (checkpointed blocks re-allocate to recompute).
std::int64_t predict_activation_peak_bytes(const GptConfig& c, const ActivationDims& d, const CheckpointPolicy& policy);

// Selective checkpointing's home for the outputs a block does not keep: ln [B,T,C] (ln_1's output,
// then ln_2's) and gelu [B,T,4C], one of each for the model (workspace: a 5 BTC). Every op that
// recomputes them is the one the forward ran, on the same inputs, so the bits are the same.
struct RecomputeScratch {
  Buffer storage;
  TensorView ln, gelu;

  RecomputeScratch(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx);
  static std::int64_t bytes(const ActivationDims& d) { return d.selective ? d.act_bytes() * 5 * d.BTC() : 0; }
};

struct BlockActivations {
  Buffer storage;                      // one tracked allocation per block
  TensorView ln1, ln1_mean, ln1_rstd;  // [B,T,C], [B,T], [B,T]
  TensorView qkv;                      // [B,T,3C]
  TensorView att;                      // [B,NH,T,T] softmax probabilities (materialised attention)
  TensorView lse;                      // [B,NH,T] row log-sum-exps (flash attention)
  TensorView atty;                     // [B,T,C] attention output before projection
  TensorView resid2;                   // [B,T,C] x + attention branch
  TensorView ln2, ln2_mean, ln2_rstd;  // [B,T,C], [B,T], [B,T]
  TensorView fch, fch_gelu;            // [B,T,4C] before / after GELU
  // Selective: ln1 and ln2 view the scratch's ln, fch_gelu its gelu; backward recomputes them.
  bool recomputes_cheap_outputs = false;

  // `scratch`: the model's, used when d.selective.
  BlockActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx,
                   const RecomputeScratch* scratch = nullptr);
};

struct HeadActivations {
  Buffer storage;
  TensorView lnf, lnf_mean, lnf_rstd;  // [B,T,C], [B,T], [B,T]
  TensorView probs;                    // [B,T,Vp] logits, softmax in place, then dlogits
                                       // (in chunks: [BT, Vc], one chunk's logits, then its dlogits)
  TensorView losses;                   // [B,T]
  // In vocabulary chunks only: the online softmax's row statistics ([B,T] each; row_max becomes
  // the log-sum-exp) and one chunk's part of the ln_f output's gradient [B,T,C].
  TensorView row_max, row_sum, target_logit, dlnf_part;

  HeadActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx);
};

}  // namespace zt::gpt
