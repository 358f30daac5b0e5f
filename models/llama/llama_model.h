// A Llama decoder over the kernels, reaching its parameters through a ParamStore unit by unit in
// execution order, as GptModel does: token embedding (no position table), layers (llama_block),
// final RMSNorm, LM head (tied to the embeddings or its own), cross-entropy. Checkpointed layers
// keep only their input and recompute their forward in backward. Activations (and activation
// gradients) F32 or BF16; parameters in the store's dtype (bf16 ones with fp32 activations reach
// the kernels as fp32 copies, KernelParams).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/buffer.h"
#include "engine/sharding/param_store.h"
#include "kernels/exec_context.h"
#include "models/checkpoint_policy.h"
#include "models/kernel_params.h"
#include "models/language_model.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

// The store calls of each pass: embeddings; each layer; the final unit (with the embeddings again
// for a tied head). Backward: the head (a tied head's embedding contribution first), the layers in
// reverse, the embedding scatter-add last.
PassSchedule forward_schedule(const LlamaConfig& c);
PassSchedule backward_schedule(const LlamaConfig& c);

// The head's activations: rstd and losses 4 BT each, lnf and the logits act x BT (C + Vp).
std::int64_t head_bytes(const LayerDims& d, std::int64_t Vp);

class LlamaModel final : public LanguageModel {
 public:
  // Sized for batches of `batch` sequences of `seq_len` tokens (seq_len <= block_size).
  LlamaModel(const LlamaConfig& config, int batch, int seq_len, CheckpointPolicy policy, MemoryTracker& tracker,
             const ExecContext& ctx, DType activations = DType::kF32);
  ~LlamaModel() override;

  const LlamaConfig& config() const { return config_; }
  const ParamTable& table() const override { return table_; }
  int batch() const override { return static_cast<int>(dims_.B); }
  int seq_len() const override { return static_cast<int>(dims_.T); }
  int vocab_size() const override { return config_.vocab_size; }
  // The mean cross-entropy of targets [B, T] given inputs [B, T]; keeps what backward needs.
  // options.logits_out, when set, receives the unpadded logits [B, T, V]. (No dropout, and the
  // loss's gradient is taken in backward, so training, first_sample and backward_loss_scale
  // change nothing.)
  float forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                const ForwardOptions& options = {}) override;
  // Every unit's gradient of loss_scale x the mean loss to the store.
  void backward(ParamStore& store, float loss_scale = 1.0f) override;
  void release_activations() override;

 private:
  TensorView resid(int layer) const;
  TensorView zeroed_grad(int unit);

  LlamaConfig config_;
  ParamTable table_;
  LayerDims dims_;
  std::int64_t Vp_;
  CheckpointPolicy policy_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  KernelParams params_;
  PassSchedule forward_schedule_, backward_schedule_;
  Buffer grad_scratch_;  // fp32, the largest unit
  Buffer dresid_;        // [B, T, C]
  LayerGradScratch layer_scratch_;
  // The step in flight.
  Buffer tokens_;                                              // inputs then targets, i32
  Buffer stream_;                                              // the residual stream: (n_layer + 1) x [B, T, C]
  std::vector<std::unique_ptr<LayerActivations>> layer_acts_;  // null for checkpointed layers
  Buffer head_;  // rstd and losses [B, T] (F32), lnf [B, T, C] and the logits [B, T, Vp] (activations)
};

}  // namespace zt::llama
