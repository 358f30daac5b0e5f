// CpuBackend: each entry of OpsBackend forwards to its kernel in kernels/cpu; the memory entries
// are the host's (malloc'd Buffers, memset, memmove). It has no fused kernels, so the optional
// entries keep their defaults and kernels/ops runs the separate ops instead.
#include "kernels/cpu/cpu_backend.h"

#include <cstring>

#include "engine/base/core/check.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cached_attention.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/chunked_cross_entropy.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/int8_blocks.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"

namespace zt::cpu {

namespace {

class CpuBackend final : public OpsBackend {
 public:
  explicit CpuBackend(bool fuses_residual = false) : fuses_residual_(fuses_residual) {}
  const char* name() const override { return fuses_residual_ ? "cpu (residual fused)" : "cpu"; }

  // ---- memory ----
  Buffer allocate(const ExecContext&, MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
                  bool zero_fill) const override {
    return Buffer(tracker, category, dtype, numel, Device::kCPU, zero_fill);
  }
  void fill_zero(const ExecContext&, TensorView x) const override {
    std::memset(x.data, 0, static_cast<std::size_t>(x.size_bytes()));
  }
  void copy(const ExecContext&, TensorView dst, TensorView src) const override {
    ZT_CHECK(dst.device == Device::kCPU && src.device == Device::kCPU, "a device copy on a CPU context");
    std::memmove(dst.data, src.data, static_cast<std::size_t>(dst.size_bytes()));
  }
  void synchronize(const ExecContext&) const override {}  // every CPU kernel has finished when it returns

  // ---- embedding ----
  void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte,
                         TensorView wpe) const override {
    cpu::embedding_forward(ctx, out, tokens, wte, wpe);
  }
  void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout,
                          TensorView tokens) const override {
    cpu::embedding_backward(ctx, dwte, dwpe, dout, tokens);
  }
  void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                              TensorView wpe, std::int64_t row_begin, std::int64_t vocab) const override {
    cpu::embedding_forward_rows(ctx, out, tokens, wte_rows, wpe, row_begin, vocab);
  }
  void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                               TensorView tokens, std::int64_t row_begin, std::int64_t vocab) const override {
    cpu::embedding_backward_rows(ctx, dwte_rows, dwpe, dout, tokens, row_begin, vocab);
  }

  // ---- normalisation ----
  void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                         TensorView weight, TensorView bias) const override {
    cpu::layernorm_forward(ctx, out, mean, rstd, inp, weight, bias);
  }
  void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                  TensorView rstd, TensorView a, TensorView b, TensorView weight,
                                  TensorView bias) const override {
    cpu::layernorm_residual_forward(ctx, residual, out, mean, rstd, a, b, weight, bias);
  }
  void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                          TensorView dout, TensorView inp, TensorView weight, TensorView mean,
                          TensorView rstd) const override {
    cpu::layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd);
  }
  void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                       float eps) const override {
    cpu::rmsnorm_forward(ctx, out, rstd, inp, weight, eps);
  }
  void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                        TensorView weight, TensorView rstd) const override {
    cpu::rmsnorm_backward(ctx, dinp, dweight, dout, inp, weight, rstd);
  }

  // ---- linear layers ----
  void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                      TensorView bias) const override {
    cpu::matmul_forward(ctx, out, inp, weight, layout, bias);
  }
  void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                       TensorView inp, TensorView weight, WeightLayout layout) const override {
    cpu::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout);
  }
  // Only as residual_fusing_ops_backend: the product, then the add (the same bits as ops' composition).
  bool fuses_residual_into_matmul(const ExecContext&, TensorView, TensorView) const override { return fuses_residual_; }
  void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                               WeightLayout layout, TensorView bias, TensorView residual) const override {
    ZT_CHECK(fuses_residual_, "matmul_residual_forward on a CPU backend that does not fuse it");
    cpu::matmul_forward(ctx, out, inp, weight, layout, bias);
    cpu::residual_forward(ctx, out, out, residual);
  }
  // The CPU kernels add parameter gradients in fp32 only.
  bool adds_param_grads_into(DType grad_dtype, DType) const override { return grad_dtype == DType::kF32; }

  // ---- attention: materialised probabilities only (no fused kernels) ----
  void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                         const DropoutSpec& dropout, int n_kv_head) const override {
    cpu::attention_forward(ctx, out, att, qkv, n_head, dropout, n_kv_head);
  }
  void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head,
                                int n_kv_head) const override {
    cpu::cached_attention_forward(ctx, out, cache, n_head, n_kv_head);
  }
  void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                          int n_head, const DropoutSpec& dropout, int n_kv_head) const override {
    cpu::attention_backward(ctx, dqkv, dout, qkv, att, n_head, dropout, n_kv_head);
  }
  std::string cudnn_attention_refuses(AttentionKernels, DType, std::int64_t, bool) const override {
    return "the CPU has no cuDNN";
  }

  // ---- element-wise ----
  void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) const override {
    cpu::gelu_forward(ctx, out, inp);
  }
  void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) const override {
    cpu::gelu_backward(ctx, dinp, inp, dout);
  }
  void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) const override {
    cpu::swiglu_forward(ctx, out, gate_up);
  }
  void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up,
                       TensorView dout) const override {
    cpu::swiglu_backward(ctx, dgate_up, gate_up, dout);
  }
  void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                    std::int64_t first_position) const override {
    cpu::rope_forward(ctx, x, n_heads, head_size, freq, first_position);
  }
  void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size,
                     const RopeFrequencies& freq) const override {
    cpu::rope_backward(ctx, dx, n_heads, head_size, freq);
  }
  void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) const override {
    cpu::residual_forward(ctx, out, a, b);
  }
  void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) const override {
    cpu::dropout_forward(ctx, out, in, spec);
  }
  void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout,
                        const DropoutSpec& spec) const override {
    cpu::dropout_backward(ctx, dinp, dout, spec);
  }

  // ---- loss ----
  void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                     TensorView targets, int vocab_size) const override {
    cpu::softmax_cross_entropy_forward(ctx, losses, probs, logits, targets, vocab_size);
  }
  void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                      float dloss, int vocab_size) const override {
    cpu::softmax_cross_entropy_backward(ctx, dlogits, probs, targets, dloss, vocab_size);
  }
  void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                   TensorView targets, float dloss, int vocab_size) const override {
    cpu::softmax_cross_entropy_fused(ctx, losses, dlogits, logits, targets, dloss, vocab_size);
  }
  void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum,
                                 TensorView target_logit, TensorView logits, TensorView targets, std::int64_t begin,
                                 int vocab_size, bool first) const override {
    cpu::cross_entropy_chunk_stats(ctx, row_max, row_sum, target_logit, logits, targets, begin, vocab_size, first);
  }
  void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                                TensorView row_sum, TensorView target_logit) const override {
    cpu::cross_entropy_chunk_loss(ctx, losses, lse, row_max, row_sum, target_logit);
  }
  void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                    TensorView targets, std::int64_t begin, float dloss,
                                    int vocab_size) const override {
    cpu::cross_entropy_chunk_backward(ctx, dlogits, logits, lse, targets, begin, dloss, vocab_size);
  }

  // ---- parameter store and optimizer ----
  void cast(const ExecContext& ctx, TensorView dst, TensorView src) const override { cpu::cast(ctx, dst, src); }
  void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) const override {
    cpu::accumulate_into(ctx, dst, src);
  }
  double sum_of_squares(const ExecContext& ctx, TensorView x) const override { return cpu::sum_of_squares(ctx, x); }
  void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) const override {
    cpu::quantize_int8_blocks(ctx, src, packed);
  }
  void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst,
                              bool accumulate) const override {
    cpu::dequantize_int8_blocks(ctx, packed, dst, accumulate);
  }
  void scale(const ExecContext& ctx, TensorView x, float factor) const override { cpu::scale(ctx, x, factor); }
  std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) const override {
    return cpu::sum_of_squares_each(ctx, xs);
  }
  exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs) const override {
    return cpu::exact_sum_of_squares(ctx, xs);
  }
  void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                    TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) const override {
    cpu::adamw_update(ctx, param, grad, m, v, working_out, hyper, step, grad_scale);
  }
  void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                           int step, float grad_scale) const override {
    cpu::adamw_update_slices(ctx, slices, hyper, step, grad_scale);
  }

 private:
  bool fuses_residual_;
};

}  // namespace

const OpsBackend& ops_backend() {
  static const CpuBackend backend;
  return backend;
}

const OpsBackend& residual_fusing_ops_backend() {
  static const CpuBackend backend(/*fuses_residual=*/true);
  return backend;
}

}  // namespace zt::cpu
