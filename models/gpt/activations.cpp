// Activation buffers carved from one tracked allocation each, and their peak prediction.
#include "models/gpt/activations.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/base/core/memory_tracker.h"
#include "kernels/ops.h"

namespace zt::gpt {

namespace {

// Hands out consecutive views of a buffer, 4-byte statistics first (so every view stays aligned to
// its element size), then the activations; checks at the end that it used the buffer exactly.
class Carver {
 public:
  explicit Carver(const Buffer& b) : base_(static_cast<char*>(b.data())), size_(b.size_bytes()), device_(b.device()) {}
  TensorView take(DType dtype, Shape s) {
    TensorView v{base_ + used_, dtype, device_, s};
    used_ += static_cast<std::int64_t>(v.size_bytes());
    ZT_CHECK(used_ <= size_);
    return v;
  }
  void finish() const { ZT_CHECK(used_ == size_, "carved {} of {} bytes", used_, size_); }

 private:
  char* base_;
  std::int64_t size_;
  std::int64_t used_ = 0;
  Device device_;
};

constexpr std::int64_t kStatBytes = 4;  // fp32 statistics and i32 token ids

// A tracked allocation of `bytes` in the activation dtype (every size is a multiple of it).
Buffer allocate_bytes(const ExecContext& ctx, MemoryTracker& tracker, const ActivationDims& d, std::int64_t bytes) {
  ZT_CHECK(bytes % d.act_bytes() == 0);
  return ops::allocate(ctx, tracker, MemCategory::kActivations, d.act, bytes / d.act_bytes(),
                       /*zero_fill=*/false);  // every kernel writes all of its outputs
}

}  // namespace

ActivationDims activation_dims(const GptConfig& c, std::int64_t batch, std::int64_t seq_len, Device device,
                               DType activations, int head_chunks, bool selective) {
  ZT_CHECK(activations == DType::kF32 || activations == DType::kBF16, "activations are F32 or BF16");
  const bool flash = ops::flash_attention_available(device, batch, c.n_head, c.n_embd / c.n_head);
  return ActivationDims{batch,
                        seq_len,
                        c.n_embd,
                        c.n_head,
                        c.padded_vocab_size(),
                        flash,
                        activations,
                        head_chunk_columns(c, head_chunks),
                        selective};
}

std::string describe_attention(const GptConfig& c, const ActivationDims& d, Device device, AttentionKernels choice,
                               bool dropout) {
  if (d.flash_attention) {
    const std::int64_t hs = c.head_size();
    const std::string flash = fmt::format(
        "flash kernels on {}", ops::flash_attention_on_tensor_cores(device, d.act, hs) ? "tensor cores" : "CUDA cores");
    const std::string why = ops::cudnn_attention_refuses(device, choice, d.act, hs, dropout);
    if (why.empty()) return "cuDNN fused attention (no T x T probabilities kept)";
    if (dropout && ops::cudnn_attention_refuses(device, choice, d.act, hs, false).empty()) {
      return fmt::format("cuDNN fused attention in evaluation, {} in training (no T x T probabilities kept; {})", flash,
                         why);
    }
    return fmt::format("{} (no T x T probabilities kept; not cuDNN: {})", flash, why);
  }
  if (device != Device::kCUDA) return "materialised (T x T probabilities kept)";
  const std::int64_t hs = c.head_size();
  // The flash kernels' shapes are a rule every build answers ([Note: a GPU run's routes in a build
  // without CUDA] in kernels/ops.cpp).
  const std::string why = ops::flash_attention_available(Device::kCUDA, 1, 1, hs)
                              ? fmt::format("micro_batch * n_head = {} exceeds the flash kernels' 65535", d.B * d.NH)
                              : fmt::format("the flash kernels have no head size {} (8-128, powers of 2)", hs);
  return fmt::format("materialised (T x T probabilities kept: {}; {} a block)", why,
                     format_bytes(d.act_bytes() * d.B * d.NH * d.T * d.T));
}

std::int64_t block_activation_bytes(const ActivationDims& d) {
  const std::int64_t probabilities = d.flash_attention ? 0 : d.B * d.NH * d.T * d.T;
  const std::int64_t lse = d.flash_attention ? d.B * d.NH * d.T : 0;
  return d.act_bytes() * ((d.selective ? 9 : 15) * d.BTC() + probabilities) + kStatBytes * (4 * d.BT() + lse);
}

std::int64_t head_activation_bytes(const ActivationDims& d) {
  if (d.head_chunked()) return d.act_bytes() * (2 * d.BTC() + d.BT() * d.Vc) + kStatBytes * 6 * d.BT();
  return d.act_bytes() * (d.BTC() + d.BT() * d.Vp) + kStatBytes * 3 * d.BT();
}

std::int64_t token_ids_bytes(const ActivationDims& d) { return kStatBytes * 2 * d.BT(); }

std::int64_t residual_stream_bytes(const ActivationDims& d, int n_layer) {
  return token_ids_bytes(d) + d.act_bytes() * (n_layer + 1) * d.BTC();
}

std::int64_t predict_activation_peak_bytes(const GptConfig& c, const ActivationDims& d,
                                           const CheckpointPolicy& policy) {
  return checkpointed_peak_bytes(policy, c.n_layer, residual_stream_bytes(d, c.n_layer), block_activation_bytes(d),
                                 head_activation_bytes(d));
}

RecomputeScratch::RecomputeScratch(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx) {
  if (!d.selective) return;
  storage = ops::allocate(ctx, tracker, MemCategory::kWorkspace, d.act, bytes(d) / d.act_bytes(), /*zero_fill=*/false);
  Carver c(storage);
  ln = c.take(d.act, {d.B, d.T, d.C});
  gelu = c.take(d.act, {d.B, d.T, 4 * d.C});
  c.finish();
}

BlockActivations::BlockActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx,
                                   const RecomputeScratch* scratch)
    : storage(allocate_bytes(ctx, tracker, d, block_activation_bytes(d))), recomputes_cheap_outputs(d.selective) {
  ZT_CHECK(!d.selective || (scratch != nullptr && scratch->ln.data != nullptr), "selective without a scratch");
  Carver c(storage);
  ln1_mean = c.take(DType::kF32, {d.B, d.T});
  ln1_rstd = c.take(DType::kF32, {d.B, d.T});
  ln2_mean = c.take(DType::kF32, {d.B, d.T});
  ln2_rstd = c.take(DType::kF32, {d.B, d.T});
  if (d.flash_attention) lse = c.take(DType::kF32, {d.B, d.NH, d.T});
  ln1 = d.selective ? scratch->ln : c.take(d.act, {d.B, d.T, d.C});
  qkv = c.take(d.act, {d.B, d.T, 3 * d.C});
  if (!d.flash_attention) att = c.take(d.act, {d.B, d.NH, d.T, d.T});
  atty = c.take(d.act, {d.B, d.T, d.C});
  resid2 = c.take(d.act, {d.B, d.T, d.C});
  ln2 = d.selective ? scratch->ln : c.take(d.act, {d.B, d.T, d.C});
  fch = c.take(d.act, {d.B, d.T, 4 * d.C});
  fch_gelu = d.selective ? scratch->gelu : c.take(d.act, {d.B, d.T, 4 * d.C});
  c.finish();
}

HeadActivations::HeadActivations(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx)
    : storage(allocate_bytes(ctx, tracker, d, head_activation_bytes(d))) {
  Carver c(storage);
  lnf_mean = c.take(DType::kF32, {d.B, d.T});
  lnf_rstd = c.take(DType::kF32, {d.B, d.T});
  losses = c.take(DType::kF32, {d.B, d.T});
  if (d.head_chunked()) {
    row_max = c.take(DType::kF32, {d.B, d.T});
    row_sum = c.take(DType::kF32, {d.B, d.T});
    target_logit = c.take(DType::kF32, {d.B, d.T});
  }
  lnf = c.take(d.act, {d.B, d.T, d.C});
  probs = c.take(d.act, {d.BT(), d.Vc});
  if (d.head_chunked()) dlnf_part = c.take(d.act, {d.B, d.T, d.C});
  c.finish();
}

}  // namespace zt::gpt
