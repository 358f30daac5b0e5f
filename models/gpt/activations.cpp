// Activation buffers carved from one tracked allocation each, and their peak prediction.
#include "models/gpt/activations.h"

#include <algorithm>

#include "kernels/ops.h"

namespace zt::gpt {

namespace {

// Hands out consecutive views of a buffer; checks at the end that it used it exactly.
class Carver {
 public:
  explicit Carver(const Buffer& b) : base_(b.as<float>()), size_(b.numel()), device_(b.device()) {}
  TensorView take(Shape s) {
    TensorView v{base_ + used_, DType::kF32, device_, s};
    used_ += s.numel();
    ZT_CHECK(used_ <= size_);
    return v;
  }
  void finish() const { ZT_CHECK(used_ == size_, "carved {} of {} elements", used_, size_); }

 private:
  float* base_;
  std::int64_t size_;
  std::int64_t used_ = 0;
  Device device_;
};

}  // namespace

ActivationDims activation_dims(const GptConfig& c, std::int64_t batch, std::int64_t seq_len, Device device,
                               float dropout) {
  const bool flash = dropout == 0.0f && ops::flash_attention_available(device, batch, c.n_head, c.n_embd / c.n_head);
  return ActivationDims{batch, seq_len, c.n_embd, c.n_head, c.padded_vocab_size(), flash};
}

std::int64_t block_activation_numel(const ActivationDims& d) {
  const std::int64_t attention = d.flash_attention ? d.B * d.NH * d.T : d.B * d.NH * d.T * d.T;
  return 15 * d.BTC() + 4 * d.BT() + attention;
}

std::int64_t head_activation_numel(const ActivationDims& d) { return d.BTC() + 3 * d.BT() + d.BT() * d.Vp; }

std::int64_t residual_stream_numel(const ActivationDims& d, int n_layer) { return (n_layer + 1) * d.BTC() + 2 * d.BT(); }

std::int64_t predict_activation_peak_bytes(const GptConfig& c, const ActivationDims& d,
                                           const CheckpointPolicy& policy) {
  const std::int64_t block = block_activation_numel(d), head = head_activation_numel(d);
  std::int64_t live = residual_stream_numel(d, c.n_layer), peak = live;
  auto alloc = [&](std::int64_t n) { live += n; peak = std::max(peak, live); };
  for (int l = 0; l < c.n_layer; ++l) {
    alloc(block);
    if (policy.is_checkpointed(l)) live -= block;
  }
  alloc(head);
  live -= head;
  for (int l = c.n_layer - 1; l >= 0; --l) {
    if (policy.is_checkpointed(l)) alloc(block);
    live -= block;
  }
  ZT_CHECK(live == residual_stream_numel(d, c.n_layer));
  return peak * static_cast<std::int64_t>(sizeof(float));
}

BlockActivations::BlockActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx)
    : storage(ops::allocate(ctx, tracker, MemCategory::kActivations, DType::kF32, block_activation_numel(d),
                            /*zero_fill=*/false)) {  // every kernel writes all of its outputs
  Carver c(storage);
  ln1 = c.take({d.B, d.T, d.C});
  ln1_mean = c.take({d.B, d.T});
  ln1_rstd = c.take({d.B, d.T});
  qkv = c.take({d.B, d.T, 3 * d.C});
  if (d.flash_attention) {
    lse = c.take({d.B, d.NH, d.T});
  } else {
    att = c.take({d.B, d.NH, d.T, d.T});
  }
  atty = c.take({d.B, d.T, d.C});
  resid2 = c.take({d.B, d.T, d.C});
  ln2 = c.take({d.B, d.T, d.C});
  ln2_mean = c.take({d.B, d.T});
  ln2_rstd = c.take({d.B, d.T});
  fch = c.take({d.B, d.T, 4 * d.C});
  fch_gelu = c.take({d.B, d.T, 4 * d.C});
  c.finish();
}

HeadActivations::HeadActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx)
    : storage(ops::allocate(ctx, tracker, MemCategory::kActivations, DType::kF32, head_activation_numel(d),
                            /*zero_fill=*/false)) {
  Carver c(storage);
  lnf = c.take({d.B, d.T, d.C});
  lnf_mean = c.take({d.B, d.T});
  lnf_rstd = c.take({d.B, d.T});
  probs = c.take({d.B, d.T, d.Vp});
  losses = c.take({d.B, d.T});
  c.finish();
}

}  // namespace zt::gpt
