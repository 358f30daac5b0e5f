// GPT-2 forward and backward through kernels/ops, on the CPU or a GPU. The model owns its
// activations and scratch, not its parameters: it reaches them through a ParamStore, unit by unit
// in execution order, so the same model runs unsharded or under any ZeRO stage. It knows nothing
// about parallelism.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/distributed/sharding/param_store.h"
#include "kernels/exec_context.h"
#include "models/gpt/activations.h"
#include "models/gpt/block.h"
#include "models/gpt/gpt_params.h"
#include "models/kernel_params.h"
#include "models/language_model.h"
#include "models/unit_runner.h"
#include "models/vocab_chunk_passes.h"

namespace zt::gpt {

using zt::ForwardOptions;  // models/language_model.h

// Its blocks run through a UnitRunner (models/unit_runner.h), which makes their store calls; the
// model supplies the blocks' math (BlockMath, below). The head's and embeddings' store calls are
// models/unit_scope.h's and models/vocab_chunk_passes.h's; the model says which unit and slot.
class GptModel final : public LanguageModel, private BlockMath, private VocabChunks {
 public:
  // Sized for batches of `batch` sequences of `seq_len` tokens (seq_len <= block_size). `dropout`
  // is the probability used at every site (embedding output, attention probabilities, both
  // residual branches), with masks keyed by `seed` (see kernels/contracts/dropout_spec.h). `activations` is
  // the dtype of every activation and activation gradient (F32 or BF16, docs/precision.md).
  // `layout` cuts the parameters into units (gpt_params.h). head_chunks > 1: the LM head computes
  // its logits in that many vocabulary chunks, one at a time (head_chunk_columns), never holding
  // them whole; wte is split by rows into one unit per chunk, acquired in turn by the embedding
  // and the head; a training step computes the logits twice (the loss needs every chunk before any
  // gradient), and each chunk's gradient is reduced in two rounds, the head's at once and the
  // embedding's at the end (gpt_schedule.h). block_units = 2: each block acquires its attention
  // unit for the attention half and its MLP unit for the MLP half (the same kernels in the same
  // order, so the same bits).
  GptModel(const GptConfig& config, int batch, int seq_len, CheckpointPolicy policy, MemoryTracker& tracker,
           const ExecContext& ctx, float dropout = 0.0f, std::uint64_t seed = 0, DType activations = DType::kF32,
           const UnitLayout& layout = {}, bool with_backward = true);
  ~GptModel();

  const GptConfig& config() const { return config_; }
  const UnitLayout& layout() const { return layout_; }
  const ParamTable& table() const override { return table_; }
  int batch() const override { return static_cast<int>(dims_.B); }
  int seq_len() const override { return static_cast<int>(dims_.T); }
  int vocab_size() const override { return config_.vocab_size; }
  const ActivationDims& dims() const { return dims_; }

  // Forward on inputs and targets [B, T] (i32). Returns the mean cross-entropy and keeps what
  // backward needs (until backward or release_activations).
  float forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                const ForwardOptions& options = {}) override;
  // Backward of the last forward: every unit's gradient of loss_scale x the mean loss goes to the
  // store (accumulate_grads, then grads_ready). Frees the forward's activations. Gradient
  // accumulation over k micro-batches passes loss_scale = 1/k.
  void backward(ParamStore& store, float loss_scale = 1.0f) override;
  // Drops the activations of a forward that will not be followed by backward (evaluation).
  void release_activations() override;
  void release_param_copies() override { params_.release(); }
  // Each layer's qkv rows (3 C wide) for decoding.
  std::unique_ptr<KvCache> make_kv_cache(std::int64_t capacity) const override;

 private:
  KvCacheShape kv_cache_shape() const;
  TensorView zeroed_grad_scratch(int unit);
  // Where the matmul and LayerNorm backward of `unit` add its gradient: the store's own storage in
  // place where it offers it (ParamStore::in_place_grads) and this device's kernels add into its
  // dtype (ops::adds_param_grads_into), else the zeroed fp32 scratch. Either goes to
  // store.accumulate_grads afterwards. (The blocks' too: BlockMath.)
  TensorView grad_destination(ParamStore& store, int unit) override;

  // BlockMath: block l's halves over block.h's kernels, for the runner. A whole block's halves
  // are block_forward's and block_backward's, in their order: the same bits.
  BlockParams block_params(int layer, const BlockUnits& units) const;
  void allocate_block_activations(int layer) override;
  void free_block_activations(int layer) override;
  void forward_part(int layer, BlockPart part, const BlockUnits& params) override;
  void recompute_block(int layer, const BlockUnits& params) override;
  void backward_part(int layer, BlockPart part, const BlockUnits& params, const BlockUnits& grads) override;
  // The input (which = 0) or target (1) token ids kept before the residual stream.
  TensorView token_view(int which, Shape shape) const;
  TensorView resid(int layer) const;  // input of block `layer`; resid(n_layer) is the last output
  // VocabChunks: wte's chunks (chunked_head.cpp), for the chunk loops of models/vocab_chunk_passes
  // (train.head_chunks > 1): the embedding of each chunk's tokens; the forward's loss from each
  // chunk's logits; the backward's dlnf and tied wte gradient (its first round) from each chunk's
  // logits again; the embedding's scatter-add into each chunk (its second round).
  int count() const override;
  std::int64_t columns() const override;
  std::int64_t padded_vocab() const override;
  int unit(int chunk) const override;
  KernelParams& kernel_params() override;
  TensorView rows_of(const TensorView& unit_view, int chunk) const override;
  TensorView head_grad(ParamStore& store, int unit) override;
  TensorView zeroed_grad(int unit) override;
  TensorView position_grad(const TensorView& unit0_grad) const override;
  ChunkedHeadViews chunked_head_views() const;
  DropoutSpec dropout_spec(std::uint32_t site) const;
  BlockDropout block_dropout(int layer) const;

  GptConfig config_;
  UnitLayout layout_;
  ParamTable table_;
  ActivationDims dims_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  float dropout_;
  std::uint64_t seed_;
  KernelParams params_;  // the units as the kernels read them (fp32 copies of bf16 ones for fp32 activations)
  UnitRunner blocks_;    // each block's store calls around its math
  ForwardOptions step_;  // options of the forward in flight (backward regenerates its masks)

  // Workspace, allocated once.
  BlockGradScratch block_scratch_;
  RecomputeScratch recompute_scratch_;  // selective checkpointing's (empty otherwise)
  Buffer dresid_;                       // [B,T,C] gradient of the residual stream
  Buffer grad_scratch_;                 // fp32, largest unit: a unit's gradient before it goes to the store, where
                                        // the store takes none in place (the embeddings' second contribution)
  PassSchedule forward_schedule_, backward_schedule_;  // the store calls of each pass (gpt_schedule.h)

  // Activations of the step in flight.
  Buffer stream_;  // inputs and targets (i32), then the residual stream (n_layer + 1 blocks of BTC)
  std::vector<std::unique_ptr<BlockActivations>> block_acts_;
  std::unique_ptr<HeadActivations> head_acts_;
};

}  // namespace zt::gpt
