// A Llama decoder over the kernels, reaching its parameters through a ParamStore unit by unit in
// execution order, as GptModel does: token embedding (no position table), layers (llama_block),
// final RMSNorm, LM head (tied to the embeddings or its own), cross-entropy. With head_chunks > 1
// the head computes its logits a vocabulary chunk at a time into an online softmax, never holding
// them whole (a training step computes them twice), each chunk's rows of the head's table in a unit
// of their own (llama_params.h), as GPT-2's chunked head does. Checkpointed layers
// keep only their input and recompute their forward in backward. Activations (and activation
// gradients) F32 or BF16; parameters in the store's dtype (bf16 ones with fp32 activations reach
// the kernels as fp32 copies, KernelParams).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/distributed/sharding/param_store.h"
#include "kernels/exec_context.h"
#include "models/checkpoint_policy.h"
#include "models/kernel_params.h"
#include "models/language_model.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_params.h"
#include "models/unit_runner.h"
#include "models/vocab_chunk_passes.h"

namespace zt::llama {

// Each layer's units (layer_unit, and mlp_unit with split layers): what the schedules below and the
// model's UnitRunner both walk.
std::vector<BlockUnitIds> layer_unit_ids(const LlamaConfig& c, const UnitLayout& layout);

// The store calls of each pass (llama_schedule.cpp): embeddings (a tied table's every chunk);
// each layer; the final unit, with the head's table (the tied embeddings, or each chunk in turn).
// Backward: the head (a tied head's embedding contribution first; with chunks, each chunk reduced
// in turn), the final unit, the layers in reverse, the embedding scatter-add last (a tied table's
// second round, chunk by chunk). With layers in two units, each layer's attention unit then its
// MLP unit forward; backward the MLP unit then the attention unit (acquired first when the layer
// is checkpointed: the recompute reads both).
PassSchedule forward_schedule(const LlamaConfig& c, const UnitLayout& layout = {});
PassSchedule backward_schedule(const LlamaConfig& c, const UnitLayout& layout = {},
                               const CheckpointPolicy& policy = {});

// The head's activations: rstd and losses 4 BT each, lnf act BTC and the logits act BT Vp; in
// chunks of Vc < Vp columns, also the online softmax's three row statistics (4 BT each) and a part
// of dlnf (act BTC), the logits act BT Vc.
std::int64_t head_bytes(const LayerDims& d, std::int64_t Vp, std::int64_t Vc);

// Its layers run through a UnitRunner (models/unit_runner.h), which makes their store calls; the
// model supplies the layers' math (BlockMath, below). The head's and embedding's store calls are
// models/unit_scope.h's and models/vocab_chunk_passes.h's; the model says which unit and slot.
class LlamaModel final : public LanguageModel, private BlockMath, private VocabChunks {
 public:
  // Sized for batches of `batch` sequences of `seq_len` tokens (seq_len <= block_size).
  LlamaModel(const LlamaConfig& config, int batch, int seq_len, CheckpointPolicy policy, MemoryTracker& tracker,
             const ExecContext& ctx, DType activations = DType::kF32, const UnitLayout& layout = {},
             bool with_backward = true);
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
  void release_param_copies() override { params_.release(); }
  // Each layer's qkv rows ((n_head + 2 n_kv_head) head_size wide) for decoding.
  std::unique_ptr<KvCache> make_kv_cache(std::int64_t capacity) const override;

 private:
  KvCacheShape kv_cache_shape() const;
  TensorView resid(int layer) const;
  // The step's token ids (tokens_): inputs [B, T], then targets [BT].
  TensorView input_tokens() const;
  TensorView target_tokens() const;
  TensorView zeroed_grad(int unit) override;
  // The head buffer's parts: rstd, losses (and in chunks the online softmax's row_max, row_sum,
  // target_logit) [BT] in fp32; lnf [B, T, C], the logits [BT, Vp] or one chunk's [BT, Vc] (then
  // their probabilities or dlogits in place) and, in chunks, a part of dlnf [B, T, C], in the
  // activation dtype.
  struct HeadViews {
    TensorView rstd, losses, row_max, row_sum, target_logit, lnf, logits, dlnf_part;
  };
  HeadViews head_views() const;
  bool head_chunked() const { return Vc_ < Vp_; }
  // VocabChunks: the head's table in chunks (llama_head.cpp), for the chunk loops of
  // models/vocab_chunk_passes; a Llama's head gradient goes through the zeroed fp32 scratch.
  int count() const override { return head_chunk_count(); }
  std::int64_t columns() const override { return Vc_; }
  std::int64_t padded_vocab() const override { return Vp_; }
  int unit(int chunk) const override;
  KernelParams& kernel_params() override;
  TensorView rows_of(const TensorView& unit_view, int chunk) const override;
  TensorView head_grad(ParamStore& store, int unit) override { return grad_destination(store, unit); }
  ChunkedHeadViews chunked_views(const HeadViews& h) const;
  int head_chunk_count() const { return static_cast<int>((Vp_ + Vc_ - 1) / Vc_); }
  // The head (llama_head.cpp): the forward from resid(L) to the losses (the logits into logits_out
  // when set); the backward from the losses to dresid (the head's and the final unit's gradients to
  // the store); the embedding's forward and backward, by chunks for a tied chunked table.
  void embedding_forward(ParamStore& store, TensorView tokens);
  void head_forward(ParamStore& store, TensorView targets, float* logits_out);
  void head_backward(ParamStore& store, TensorView targets, float loss_scale, TensorView dresid);
  void embedding_backward(ParamStore& store, TensorView tokens, TensorView dresid);
  // BlockMath: layer l's halves over llama_block's kernels, for the runner. A whole layer's halves
  // are layer_forward's and layer_backward's, in their order: the same bits.
  LayerParams layer_params(int layer, const BlockUnits& units) const;
  void allocate_block_activations(int layer) override;
  void free_block_activations(int layer) override;
  void forward_part(int layer, BlockPart part, const BlockUnits& params) override;
  void recompute_block(int layer, const BlockUnits& params) override;
  void backward_part(int layer, BlockPart part, const BlockUnits& params, const BlockUnits& grads) override;
  // The zeroed fp32 scratch (zeroed_grad): a Llama takes no gradient in place.
  TensorView grad_destination(ParamStore& store, int unit) override;

  LlamaConfig config_;
  UnitLayout layout_;
  ParamTable table_;
  LayerDims dims_;
  std::int64_t Vp_, Vc_;  // padded vocabulary, and the head's chunk of it (Vp: one chunk)
  MemoryTracker& tracker_;
  ExecContext ctx_;
  KernelParams params_;
  UnitRunner layers_;  // each layer's store calls around its math
  PassSchedule forward_schedule_, backward_schedule_;
  KvCache* kv_cache_ = nullptr;  // the decoding forward's, while it runs
  Buffer grad_scratch_;          // fp32, the largest unit
  Buffer dresid_;                // [B, T, C]
  LayerGradScratch layer_scratch_;
  LayerRecomputeScratch recompute_scratch_;  // selective checkpointing's (empty otherwise)
  // The step in flight.
  Buffer tokens_;                                              // inputs then targets, i32
  Buffer stream_;                                              // the residual stream: (n_layer + 1) x [B, T, C]
  std::vector<std::unique_ptr<LayerActivations>> layer_acts_;  // null for checkpointed layers
  Buffer head_;  // rstd and losses [B, T] (F32), lnf [B, T, C] and the logits [B, T, Vp] (activations)
};

}  // namespace zt::llama
