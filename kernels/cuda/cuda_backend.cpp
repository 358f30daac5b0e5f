// CudaBackend: each entry of OpsBackend forwards to its CUDA kernel on ctx's stream, and the
// decisions only this backend makes live here: GELU in cuBLASLt's epilogue
// (precision.gelu_epilogue), cuDNN or flash kernels for each fused-attention call
// (precision.attention), and its refusal of grouped-query heads on the materialised attention.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <set>
#include <string>

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cached_attention.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/chunked_cross_entropy.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/int8_blocks.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace zt::cuda {

namespace {

cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream); }
// The norm backwards' chunk kernel the run chose (KernelResources::norm_backward_rows).
NormBackwardRows norm_rows_of(const ExecContext& ctx) { return ctx.cuda_resources->norm_backward_rows; }

class CudaBackend final : public OpsBackend {
 public:
  const char* name() const override { return "cuda"; }
  void check_context(const ExecContext& ctx) const override {
    ZT_CHECK(ctx.allocator != nullptr && ctx.cuda_resources != nullptr, "a CUDA context without its resources");
  }

  // ---- memory: ctx.allocator's device, ordered on ctx's stream ----
  Buffer allocate(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
                  bool zero_fill) const override {
    return Buffer(tracker, category, dtype, numel, *ctx.allocator, zero_fill);
  }
  void fill_zero(const ExecContext& ctx, TensorView x) const override {
    ZT_CUDA_CHECK(cudaMemsetAsync(x.data, 0, static_cast<std::size_t>(x.size_bytes()), stream_of(ctx)));
  }
  void copy(const ExecContext& ctx, TensorView dst, TensorView src) const override {
    copy_async(dst, src, stream_of(ctx));
    if (dst.device == Device::kCPU) ZT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  }
  void synchronize(const ExecContext& ctx) const override { ZT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx))); }

  // ---- embedding ----
  void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte,
                         TensorView wpe) const override {
    cuda::embedding_forward(ctx, out, tokens, wte, wpe);
  }
  void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout,
                          TensorView tokens) const override {
    cuda::embedding_backward(ctx, dwte, dwpe, dout, tokens);
  }
  void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                              TensorView wpe, std::int64_t row_begin, std::int64_t vocab) const override {
    cuda::embedding_forward_rows(ctx, out, tokens, wte_rows, wpe, row_begin, vocab);
  }
  void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                               TensorView tokens, std::int64_t row_begin, std::int64_t vocab) const override {
    cuda::embedding_backward_rows(ctx, dwte_rows, dwpe, dout, tokens, row_begin, vocab);
  }

  // ---- normalisation ----
  void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                         TensorView weight, TensorView bias) const override {
    cuda::layernorm_forward(ctx, out, mean, rstd, inp, weight, bias);
  }
  void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                  TensorView rstd, TensorView a, TensorView b, TensorView weight,
                                  TensorView bias) const override {
    cuda::layernorm_residual_forward(ctx, residual, out, mean, rstd, a, b, weight, bias);
  }
  void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                          TensorView dout, TensorView inp, TensorView weight, TensorView mean,
                          TensorView rstd) const override {
    cuda::layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, norm_rows_of(ctx));
  }
  void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                       float eps) const override {
    cuda::rmsnorm_forward(ctx, out, rstd, inp, weight, eps);
  }
  void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                        TensorView weight, TensorView rstd) const override {
    cuda::rmsnorm_backward(ctx, dinp, dweight, dout, inp, weight, rstd, norm_rows_of(ctx));
  }

  // ---- linear layers ----
  void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                      TensorView bias) const override {
    cuda::matmul_forward(ctx, out, inp, weight, layout, bias);
  }
  void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                       TensorView inp, TensorView weight, WeightLayout layout) const override {
    cuda::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout);
  }
  // The bf16 backward kernels add into bf16 parameter gradients (rounded once per element).
  bool adds_param_grads_into(DType grad_dtype, DType act_dtype) const override {
    return grad_dtype == DType::kF32 || (grad_dtype == DType::kBF16 && act_dtype == DType::kBF16);
  }
  // cuBLASLt's GELU epilogues under precision.gelu_epilogue, for widths they take (a multiple of 8).
  bool fuses_gelu_into_matmul(const ExecContext& ctx, TensorView gelu_pre) const override {
    return ctx.cuda_resources->gelu_epilogue && gelu_pre.shape.ndim() > 0 &&
           gelu_pre.shape[gelu_pre.shape.ndim() - 1] % 8 == 0;
  }
  void matmul_gelu_forward(const ExecContext& ctx, TensorView out, TensorView gelu_pre, TensorView inp,
                           TensorView weight, WeightLayout layout, TensorView bias) const override {
    cuda::matmul_forward(ctx, out, inp, weight, layout, bias, gelu_pre);
  }
  void matmul_backward_through_gelu(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                                    TensorView dout, TensorView inp, TensorView weight, WeightLayout layout,
                                    TensorView gelu_pre) const override {
    cuda::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout, gelu_pre);
  }

  // cuBLASLt's epilogue adds the residual (beta 1), but for an F32 bias with BF16 results, which
  // takes the product in fp32 scratch ([Note: fp32 bias with bf16 results] in matmul.cu).
  bool fuses_residual_into_matmul(const ExecContext&, TensorView out, TensorView bias) const override {
    return !(out.dtype == DType::kBF16 && bias.data != nullptr && bias.dtype == DType::kF32);
  }
  void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                               WeightLayout layout, TensorView bias, TensorView residual) const override {
    cuda::matmul_residual_forward(ctx, out, inp, weight, layout, bias, residual);
  }

  // ---- attention ----
  // The materialised kernels have no grouped-query heads yet (Llama runs them on the CPU).
  void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                         const DropoutSpec& dropout, int n_kv_head) const override {
    ZT_CHECK(n_kv_head == 0 || n_kv_head == n_head,
             "attention_forward: grouped-query heads ({} kv heads for {}) run on the CPU only", n_kv_head, n_head);
    cuda::attention_forward(ctx, out, att, qkv, n_head, dropout);
  }
  void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head,
                                int n_kv_head) const override {
    cuda::cached_attention_forward(ctx, out, cache, n_head, n_kv_head);
  }
  bool cached_attention_supports(std::int64_t head_size) const override {
    return head_size <= cuda::kCachedAttentionMaxHeadSize;
  }
  void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                          int n_head, const DropoutSpec& dropout, int n_kv_head) const override {
    ZT_CHECK(n_kv_head == 0 || n_kv_head == n_head,
             "attention_backward: grouped-query heads ({} kv heads for {}) run on the CPU only", n_kv_head, n_head);
    cuda::attention_backward(ctx, dqkv, dout, qkv, att, n_head, dropout);
  }
  bool flash_attention_supports(std::int64_t batch, std::int64_t n_head, std::int64_t head_size) const override {
    return cuda::flash_attention_supports(batch, n_head, head_size);
  }
  bool flash_attention_on_tensor_cores(DType activations, std::int64_t head_size) const override {
    return cuda::flash_attention_tensor_cores(activations, head_size);
  }
  std::string cudnn_attention_refuses(AttentionKernels choice, DType activations, std::int64_t head_size,
                                      bool dropout) const override {
    if (choice == AttentionKernels::kFlash) return "precision.attention = \"flash\"";
    std::string why = cudnn_attention_unavailable();
    return why.empty() ? cuda::cudnn_attention_refuses(activations, head_size, dropout) : why;
  }
  FusedAttentionPath fused_attention_path(const ExecContext& ctx, const TensorView& qkv, int n_head, int n_kv_head,
                                          const DropoutSpec& dropout,
                                          std::initializer_list<const void*> operands) const override;
  void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                               const DropoutSpec& dropout, int n_kv_head) const override {
    cuda::flash_attention_forward(ctx, out, lse, qkv, n_head, dropout, n_kv_head);
  }
  void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out,
                                TensorView qkv, TensorView lse, int n_head, const DropoutSpec& dropout,
                                int n_kv_head) const override {
    cuda::flash_attention_backward(ctx, dqkv, dout, out, qkv, lse, n_head, dropout, n_kv_head);
  }
  void cudnn_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                               int n_kv_head) const override {
    cuda::cudnn_attention_forward(ctx, out, lse, qkv, n_head, n_kv_head);
  }
  void cudnn_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out,
                                TensorView qkv, TensorView lse, int n_head, int n_kv_head) const override {
    cuda::cudnn_attention_backward(ctx, dqkv, dout, out, qkv, lse, n_head, n_kv_head);
  }

  // ---- element-wise ----
  void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) const override {
    cuda::gelu_forward(ctx, out, inp);
  }
  void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) const override {
    cuda::gelu_backward(ctx, dinp, inp, dout);
  }
  void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) const override {
    cuda::swiglu_forward(ctx, out, gate_up);
  }
  void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up,
                       TensorView dout) const override {
    cuda::swiglu_backward(ctx, dgate_up, gate_up, dout);
  }
  void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                    std::int64_t first_position) const override {
    cuda::rope_forward(ctx, x, n_heads, head_size, freq, first_position);
  }
  void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size,
                     const RopeFrequencies& freq) const override {
    cuda::rope_backward(ctx, dx, n_heads, head_size, freq);
  }
  void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) const override {
    cuda::residual_forward(ctx, out, a, b);
  }
  void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) const override {
    cuda::dropout_forward(ctx, out, in, spec);
  }
  void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout,
                        const DropoutSpec& spec) const override {
    cuda::dropout_backward(ctx, dinp, dout, spec);
  }

  // ---- loss ----
  void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                     TensorView targets, int vocab_size) const override {
    cuda::softmax_cross_entropy_forward(ctx, losses, probs, logits, targets, vocab_size);
  }
  void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                      float dloss, int vocab_size) const override {
    cuda::softmax_cross_entropy_backward(ctx, dlogits, probs, targets, dloss, vocab_size);
  }
  void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                   TensorView targets, float dloss, int vocab_size) const override {
    cuda::softmax_cross_entropy_fused(ctx, losses, dlogits, logits, targets, dloss, vocab_size);
  }
  void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum,
                                 TensorView target_logit, TensorView logits, TensorView targets, std::int64_t begin,
                                 int vocab_size, bool first) const override {
    cuda::cross_entropy_chunk_stats(ctx, row_max, row_sum, target_logit, logits, targets, begin, vocab_size, first);
  }
  void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                                TensorView row_sum, TensorView target_logit) const override {
    cuda::cross_entropy_chunk_loss(ctx, losses, lse, row_max, row_sum, target_logit);
  }
  void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                    TensorView targets, std::int64_t begin, float dloss,
                                    int vocab_size) const override {
    cuda::cross_entropy_chunk_backward(ctx, dlogits, logits, lse, targets, begin, dloss, vocab_size);
  }

  // ---- parameter store and optimizer ----
  void cast(const ExecContext& ctx, TensorView dst, TensorView src) const override { cuda::cast(ctx, dst, src); }
  void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) const override {
    cuda::accumulate_into(ctx, dst, src);
  }
  double sum_of_squares(const ExecContext& ctx, TensorView x) const override { return cuda::sum_of_squares(ctx, x); }
  void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) const override {
    cuda::quantize_int8_blocks(ctx, src, packed);
  }
  void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst,
                              bool accumulate) const override {
    cuda::dequantize_int8_blocks(ctx, packed, dst, accumulate);
  }
  void scale(const ExecContext& ctx, TensorView x, float factor) const override { cuda::scale(ctx, x, factor); }
  std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) const override {
    return cuda::sum_of_squares_each(ctx, xs);
  }
  exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs) const override {
    return cuda::exact_sum_of_squares(ctx, xs);
  }
  void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                    TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) const override {
    cuda::adamw_update(ctx, param, grad, m, v, working_out, hyper, step, grad_scale);
  }
  void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                           int step, float grad_scale) const override {
    cuda::adamw_update_slices(ctx, slices, hyper, step, grad_scale);
  }
};

// cuDNN for this call where precision.attention allows it and cuDNN serves it, the flash kernels
// otherwise. Reasons the run's header already gave (the kind of operands) stay quiet; a shape or
// operand cuDNN turns down under "auto" is said once on stderr, and under "cudnn" it stops the run.
// "cudnn" is about the run's bf16 model (the config check holds it to bf16 activations): the fp32
// batch-1 model the trainer and `zerotrain sample` build for text samples runs the flash kernels
// under either choice.
FusedAttentionPath CudaBackend::fused_attention_path(const ExecContext& ctx, const TensorView& qkv, int n_head,
                                                     int n_kv_head, const DropoutSpec& dropout,
                                                     std::initializer_list<const void*> operands) const {
  const AttentionKernels choice = ctx.cuda_resources->attention;
  if (qkv.dtype != DType::kBF16) return FusedAttentionPath::kFlash;
  // qkv rows hold n_head query heads and n_kv_head (0: n_head) key and value heads of hs columns.
  const std::int64_t heads = n_head + 2 * static_cast<std::int64_t>(n_kv_head != 0 ? n_kv_head : n_head);
  const std::int64_t hs = qkv.shape.ndim() == 3 && n_head > 0 ? qkv.shape[2] / heads : 0;
  if (!cudnn_attention_refuses(choice, qkv.dtype, hs, dropout.active()).empty()) {
    ZT_CHECK(choice != AttentionKernels::kCudnn, "precision.attention = \"cudnn\": {}",
             cudnn_attention_refuses(choice, qkv.dtype, hs, dropout.active()));
    return FusedAttentionPath::kFlash;
  }
  std::string why;
  if (cudnn_attention_serves(ctx, qkv.dtype, qkv.shape[0], qkv.shape[1], n_head, hs, dropout.active(), operands, &why,
                             n_kv_head)) {
    return FusedAttentionPath::kCudnn;
  }
  if (choice == AttentionKernels::kCudnn) throw RuntimeError(fmt::format("precision.attention = \"cudnn\": {}", why));
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(why).second)
    fmt::print(stderr, "zerotrain: cuDNN attention: {}; the flash kernels run instead\n", why);
  return FusedAttentionPath::kFlash;
}

}  // namespace

const OpsBackend* ops_backend() {
  static const CudaBackend backend;
  return &backend;
}

}  // namespace zt::cuda
