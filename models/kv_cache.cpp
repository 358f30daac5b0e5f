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

KvCache::KvCache(MemoryTracker& tracker, const ExecContext& ctx, DType dtype, int n_layer, std::int64_t capacity,
                 std::int64_t row_width)
    : dtype_(dtype), capacity_(capacity), row_width_(row_width) {
  ZT_CHECK(n_layer > 0 && capacity > 0 && row_width > 0, "key/value cache of {} layers x {} positions x {}", n_layer,
           capacity, row_width);
  layers_.reserve(static_cast<std::size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    // Never read before written: a step's projection writes its rows before its attention reads them.
    layers_.push_back(ops::allocate(ctx, tracker, MemCategory::kActivations, dtype, capacity * row_width, false));
  }
}

KvStep KvCache::step(int layer, std::int64_t new_rows) const {
  ZT_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()), "key/value cache has no layer {}", layer);
  ZT_CHECK(new_rows > 0 && length_ + new_rows <= capacity_, "key/value cache: {} new positions after {} exceed its {}",
           new_rows, length_, capacity_);
  TensorView rows = layers_[static_cast<std::size_t>(layer)].view().slice(0, (length_ + new_rows) * row_width_);
  rows.shape = Shape{1, length_ + new_rows, row_width_};
  return KvStep{rows, length_};
}

void KvCache::advance(std::int64_t new_rows) {
  ZT_CHECK(new_rows > 0 && length_ + new_rows <= capacity_, "key/value cache: advance by {} after {} of {}", new_rows,
           length_, capacity_);
  length_ += new_rows;
}

}  // namespace zt
