// Parameters for the kernels, and the loss and logits back to the host (see the header).
#include "models/kernel_params.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/base/core/bf16.h"
#include "kernels/ops.h"

namespace zt {

KernelParams::KernelParams(const ParamTable& table, DType activations, MemoryTracker& tracker, const ExecContext& ctx)
    : table_(table), activations_(activations), tracker_(tracker), ctx_(ctx) {}

TensorView KernelParams::acquire(ParamStore& store, int unit, Pass pass, int slot) {
  const TensorView working = store.acquire_params(unit, pass);
  if (working.dtype == DType::kF32 || working.dtype == activations_) return working;
  for (int s = 0; s < 2; ++s) {
    if (copy_unit_[s] != unit) continue;
    // The unit just handed out must not be the next one overwritten: a split block's backward
    // re-acquires the attention unit still cached from the forward, then casts its MLP unit.
    if (slot < 0) next_slot_ = 1 - s;
    return TensorView{copies_[s].data(), DType::kF32, working.device, working.shape};
  }
  if (slot < 0) {
    slot = next_slot_;
    next_slot_ = 1 - slot;
  }
  if (copies_[slot].empty()) {
    copies_[slot] = ops::allocate(ctx_, tracker_, MemCategory::kWorkspace, DType::kF32, table_.max_unit_numel());
  }
  TensorView copy{copies_[slot].data(), DType::kF32, working.device, working.shape};
  ops::cast(ctx_, copy, working);
  copy_unit_[slot] = unit;
  return copy;
}

float mean_loss(const ExecContext& ctx, TensorView losses, float* losses_out) {
  double sum = 0.0;  // fixed order, on the host: the loss is reproducible bit for bit on either device
  std::vector<float> staging;
  const float* host = ops::on_host(ctx, losses, staging).as<float>();
  const std::int64_t n = losses.numel();
  if (losses_out != nullptr) std::copy(host, host + n, losses_out);
  for (std::int64_t i = 0; i < n; ++i) sum += host[i];
  return static_cast<float>(sum / static_cast<double>(n));
}

void copy_logits_out(const ExecContext& ctx, TensorView logits, std::int64_t first_column, std::int64_t vocab_size,
                     float* logits_out) {
  const std::int64_t width = logits.shape[logits.shape.ndim() - 1], rows = logits.numel() / width;
  const std::int64_t live = std::min(width, vocab_size - first_column);  // the padded vocabulary stays out
  if (live <= 0) return;
  std::vector<float> staging;
  const TensorView host = ops::on_host(ctx, logits, staging);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = logits_out + r * vocab_size + first_column;
    if (host.dtype == DType::kF32) {
      std::memcpy(out, host.as<float>() + r * width, static_cast<std::size_t>(live) * sizeof(float));
    } else {
      const bf16* row = host.as<bf16>() + r * width;
      for (std::int64_t v = 0; v < live; ++v) out[v] = bf16_to_float(row[v]);
    }
  }
}

}  // namespace zt
