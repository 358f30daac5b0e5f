// A sequence's keys and values so far, for decoding (engine/app/trainer/text_sampler): each
// layer's qkv rows of the positions already run, so a sampling step runs only its new tokens
// through the model and their attention reads the rest from here, instead of the whole window
// again for every token. The rows hold the queries too (the projection writes its whole output
// here, and the cached attention reads the step's queries from its new rows): a third more memory
// for GPT-2, twice for grouped-query Llamas, against a copy per step. Batch 1 (one sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "kernels/exec_context.h"

namespace zt {

// One layer's view of a decoding step: the cache's rows so far, the step's new ones last.
struct KvStep {
  TensorView rows;        // [1, position + new rows, W]
  std::int64_t position;  // the step's first position: rows from here on are the step's

  TensorView new_rows() const;  // [1, new rows, W]: where the step's projection writes
};

// What a model's cache holds: its layers' qkv rows in its activation dtype, and the most positions
// the model attends to (its context).
struct KvCacheShape {
  DType dtype;
  int n_layer;
  std::int64_t row_width;
  std::int64_t context;
  bool operator==(const KvCacheShape&) const = default;
};

class KvCache {
 public:
  // `capacity` positions (at most shape.context) of each layer's rows, in the context's memory
  // (activations category).
  KvCache(MemoryTracker& tracker, const ExecContext& ctx, const KvCacheShape& shape, std::int64_t capacity);
  // A model's cache (LanguageModel::make_kv_cache), or null where ctx's device has no cached
  // attention for heads of `head_size` (the model then samples over the window).
  static std::unique_ptr<KvCache> for_model(MemoryTracker& tracker, const ExecContext& ctx, const KvCacheShape& shape,
                                            std::int64_t head_size, std::int64_t capacity);

  const KvCacheShape& shape() const { return shape_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }  // the positions run so far

  // Throws unless a step of `new_rows` (> 0) positions fits after length().
  void check_room(std::int64_t new_rows) const;
  // Layer `layer`'s view of a step of `new_rows` positions after length(); throws past capacity.
  KvStep step(int layer, std::int64_t new_rows) const;
  // The step's positions are in every layer: the next step comes after them.
  void advance(std::int64_t new_rows);

 private:
  KvCacheShape shape_;
  std::int64_t capacity_, length_ = 0;
  std::vector<Buffer> layers_;
};

}  // namespace zt
