// The decoding cache's buffers and views (see the header).
#include "models/kv_cache.h"

#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt {

TensorView KvStep::new_rows() const {
  const std::int64_t width = rows.shape[2], n = rows.shape[1] - position;
  TensorView v = rows.slice(position * width, n * width);
  v.shape = Shape{1, n, width};
  return v;
}

KvCache::KvCache(MemoryTracker& tracker, const ExecContext& ctx, const KvCacheShape& shape, std::int64_t capacity)
    : shape_(shape), capacity_(capacity) {
  ZT_CHECK(shape.n_layer > 0 && shape.row_width > 0 && capacity > 0, "key/value cache of {} layers x {} positions x {}",
           shape.n_layer, capacity, shape.row_width);
  ZT_CHECK(capacity <= shape.context, "key/value cache: {} positions exceed the model's context of {}", capacity,
           shape.context);
  layers_.reserve(static_cast<std::size_t>(shape.n_layer));
  for (int l = 0; l < shape.n_layer; ++l) {
    // Never read before written: a step's projection writes its rows before its attention reads them.
    layers_.push_back(
        ops::allocate(ctx, tracker, MemCategory::kActivations, shape.dtype, capacity * shape.row_width, false));
  }
}

std::unique_ptr<KvCache> KvCache::for_model(MemoryTracker& tracker, const ExecContext& ctx, const KvCacheShape& shape,
                                            std::int64_t head_size, std::int64_t capacity) {
  if (!ops::cached_attention_available(ctx.device, head_size)) return nullptr;
  return std::make_unique<KvCache>(tracker, ctx, shape, capacity);
}

void KvCache::check_room(std::int64_t new_rows) const {
  ZT_CHECK(new_rows > 0 && length_ + new_rows <= capacity_, "key/value cache: {} new positions after {} exceed its {}",
           new_rows, length_, capacity_);
}

KvStep KvCache::step(int layer, std::int64_t new_rows) const {
  ZT_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()), "key/value cache has no layer {}", layer);
  check_room(new_rows);
  TensorView rows = layers_[static_cast<std::size_t>(layer)].view().slice(0, (length_ + new_rows) * shape_.row_width);
  rows.shape = Shape{1, length_ + new_rows, shape_.row_width};
  return KvStep{rows, length_};
}

void KvCache::advance(std::int64_t new_rows) {
  check_room(new_rows);
  length_ += new_rows;
}

}  // namespace zt
