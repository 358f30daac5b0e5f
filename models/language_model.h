// What the trainer, the evaluation, the sampler and debug-state ask of a model, whatever its family
// (models/gpt, models/llama): a forward that returns the mean cross-entropy and keeps what its
// backward needs, and a backward that hands each unit's gradient to the ParamStore. A model owns
// its activations and scratch, never its parameters, and knows nothing of sharding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/base/core/check.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/param_store.h"
#include "models/kv_cache.h"

namespace zt {

// Per-call options of LanguageModel::forward.
struct ForwardOptions {
  bool training = true;           // dropout applies (when the model has any)
  std::int64_t first_sample = 0;  // global sample index of batch row 0: keys the dropout masks
  float* logits_out = nullptr;    // when set, receives the unpadded logits [B, T, V]
  float* losses_out = nullptr;    // when set, receives each position's cross-entropy [B, T]
  // Set when backward follows with this loss_scale (a training step): a model may take the loss's
  // gradient in the forward's pass over the logits (GPT's softmax_cross_entropy_fused: one pass
  // instead of a forward and a backward over the largest activation). Backward must then be called
  // with the same loss_scale.
  std::optional<float> backward_loss_scale = std::nullopt;
  // Decoding (not training, batch 1): the inputs are the positions after kv_cache->length(); their
  // keys and values join the cache, their attention reads the earlier ones from it, and the cache
  // advances past them. The logits are those the whole sequence's forward would give its last rows.
  KvCache* kv_cache = nullptr;
};

// Throws unless `options` is a forward a model of `batch` sequences of `seq_len` tokens, whose cache
// would be of `shape`, runs: decoding (kv_cache) is one sequence's, with nothing kept for a
// backward, through a cache of this model's shape that holds the new positions. Called before the
// forward touches the store, so a refusal leaves no pass open.
inline void check_decoding(const ForwardOptions& options, std::int64_t batch, std::int64_t seq_len,
                           const KvCacheShape& shape) {
  const KvCache* cache = options.kv_cache;
  if (cache == nullptr) return;
  ZT_CHECK(batch == 1 && !options.training && !options.backward_loss_scale.has_value(),
           "decoding with a key/value cache runs one sequence, not training (batch {})", batch);
  ZT_CHECK(cache->shape() == shape, "key/value cache of another model ({} layers x {} wide, not {} x {})",
           cache->shape().n_layer, cache->shape().row_width, shape.n_layer, shape.row_width);
  cache->check_room(seq_len);
}

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
  // Frees the fp32 copies of bf16 parameters the kernels read with fp32 activations (KernelParams),
  // which otherwise stay between steps, so that another model over the same store (the sampler's,
  // the multiple-choice scorer's) holds its own in their place rather than beside them; the next
  // forward makes them again. Nothing for a model that keeps none.
  virtual void release_param_copies() {}
  // An empty cache of `capacity` positions (at most the model's context) for
  // ForwardOptions::kv_cache, in this model's memory and activation dtype, or null for a model that
  // decodes only by running the whole window (a family that does not implement it, or a device
  // whose kernel cannot take its heads). It outlives the model: a prompt's forward and the steps
  // after it may run on models built for their own lengths.
  virtual std::unique_ptr<KvCache> make_kv_cache(std::int64_t /*capacity*/) const { return nullptr; }
};

}  // namespace zt
