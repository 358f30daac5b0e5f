// What the trainer, the evaluation, the sampler and debug-state ask of a model, whatever its family
// (models/gpt, models/llama): a forward that returns the mean cross-entropy and keeps what its
// backward needs, and a backward that hands each unit's gradient to the ParamStore. A model owns
// its activations and scratch, never its parameters, and knows nothing of sharding.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/param_store.h"

namespace zt {

// Per-call options of LanguageModel::forward.
struct ForwardOptions {
  bool training = true;           // dropout applies (when the model has any)
  std::int64_t first_sample = 0;  // global sample index of batch row 0: keys the dropout masks
  float* logits_out = nullptr;    // when set, receives the unpadded logits [B, T, V]
  // Set when backward follows with this loss_scale (a training step): a model may take the loss's
  // gradient in the forward's pass over the logits (GPT's softmax_cross_entropy_fused: one pass
  // instead of a forward and a backward over the largest activation). Backward must then be called
  // with the same loss_scale.
  std::optional<float> backward_loss_scale = std::nullopt;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // The parameters' units, in the order the passes acquire them (the store is built over it).
  virtual const ParamTable& table() const = 0;
  virtual int batch() const = 0;       // B: sequences per forward
  virtual int seq_len() const = 0;     // T: tokens per sequence
  virtual int vocab_size() const = 0;  // V: the logits' true columns

  // Forward on inputs and targets [B, T] (i32). Returns the mean cross-entropy and keeps what
  // backward needs (until backward or release_activations).
  virtual float forward(ParamStore& store, const std::int32_t* inputs, const std::int32_t* targets,
                        const ForwardOptions& options = {}) = 0;
  // Backward of the last forward: every unit's gradient of loss_scale x the mean loss goes to the
  // store. Frees the forward's activations. Accumulation over k micro-batches passes 1/k.
  virtual void backward(ParamStore& store, float loss_scale = 1.0f) = 0;
  // Drops the activations of a forward that no backward will follow (evaluation, sampling).
  virtual void release_activations() = 0;
};

}  // namespace zt
