// Device dispatch: one branch per op, so each call site names the op once and runs on either backend;
// with a profiler on the context, each call (memory ops included, allocation excepted) is timed.
#include "kernels/ops.h"

#include <cstring>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/chunked_cross_entropy.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/op_profiler.h"
#ifdef ZT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/chunked_cross_entropy.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#endif

namespace zt::ops {

namespace {

// True for a CUDA context; a CUDA context in a build without CUDA is a programming error (the
// config refuses device = cuda there before anything is built).
bool on_cuda(const ExecContext& ctx) {
  if (ctx.device != Device::kCUDA) return false;
#ifdef ZT_HAVE_CUDA
  ZT_CHECK(ctx.allocator != nullptr && ctx.cuda_resources != nullptr, "a CUDA context without its resources");
  return true;
#else
  throw InternalError("a CUDA kernel was requested, but this build has no CUDA backend");
#endif
}

// The op's result (or void) from the backend ctx names, timed under the op's name when ctx
// carries a profiler inside a step (kernels/op_profiler.h): `return ZT_OP(op, args...)`.
#ifdef ZT_HAVE_CUDA
cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream); }
#define ZT_OP(name, ...) \
  timed_op(ctx, #name, [&] { return on_cuda(ctx) ? cuda::name(__VA_ARGS__) : cpu::name(__VA_ARGS__); })
#else
#define ZT_OP(name, ...) timed_op(ctx, #name, [&] { return on_cuda(ctx), cpu::name(__VA_ARGS__); })
#endif

}  // namespace

Buffer allocate(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
                bool zero_fill) {
  if (on_cuda(ctx)) return Buffer(tracker, category, dtype, numel, *ctx.allocator, zero_fill);
  return Buffer(tracker, category, dtype, numel, Device::kCPU, zero_fill);
}

void fill_zero(const ExecContext& ctx, TensorView x) {
  if (x.numel() == 0) return;
  timed_op(ctx, "fill_zero", [&] {
    if (on_cuda(ctx)) {
#ifdef ZT_HAVE_CUDA
      ZT_CUDA_CHECK(cudaMemsetAsync(x.data, 0, static_cast<std::size_t>(x.size_bytes()), stream_of(ctx)));
#endif
      return;
    }
    std::memset(x.data, 0, static_cast<std::size_t>(x.size_bytes()));
  });
}

void copy(const ExecContext& ctx, TensorView dst, TensorView src) {
  ZT_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy of {} {} elements into {} {}", src.numel(),
           dtype_name(src.dtype), dst.numel(), dtype_name(dst.dtype));
  if (dst.numel() == 0 || dst.data == src.data) return;
  timed_op(ctx, "copy", [&] {
    if (on_cuda(ctx)) {
#ifdef ZT_HAVE_CUDA
      cuda::copy_async(dst, src, stream_of(ctx));
      if (dst.device == Device::kCPU) ZT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
#endif
      return;
    }
    ZT_CHECK(dst.device == Device::kCPU && src.device == Device::kCPU, "a device copy on a CPU context");
    std::memmove(dst.data, src.data, static_cast<std::size_t>(dst.size_bytes()));
  });
}

TensorView on_host(const ExecContext& ctx, TensorView v, std::vector<float>& staging) {
  if (v.device == Device::kCPU) return v;
  staging.resize((v.size_bytes() + sizeof(float) - 1) / sizeof(float));
  const TensorView host{staging.data(), v.dtype, Device::kCPU, v.shape};
  copy(ctx, host, v);
  return host;
}

void synchronize(const ExecContext& ctx) {
  if (on_cuda(ctx)) {
#ifdef ZT_HAVE_CUDA
    ZT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
#endif
  }
}

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  return ZT_OP(embedding_forward, ctx, out, tokens, wte, wpe);
}
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  return ZT_OP(embedding_backward, ctx, dwte, dwpe, dout, tokens);
}
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab) {
  return ZT_OP(embedding_forward_rows, ctx, out, tokens, wte_rows, wpe, row_begin, vocab);
}
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab) {
  return ZT_OP(embedding_backward_rows, ctx, dwte_rows, dwpe, dout, tokens, row_begin, vocab);
}
void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  return ZT_OP(layernorm_forward, ctx, out, mean, rstd, inp, weight, bias);
}
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd) {
  return ZT_OP(layernorm_backward, ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias) {
  return ZT_OP(matmul_forward, ctx, out, inp, weight, layout, bias);
}
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout) {
  return ZT_OP(matmul_backward, ctx, dinp, dweight, dbias, dout, inp, weight, layout);
}
void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout, int n_kv_head) {
  if (n_kv_head != 0 && n_kv_head != n_head) {
    ZT_CHECK(ctx.device != Device::kCUDA,
             "attention_forward: grouped-query heads ({} kv heads for {}) run on the CPU only", n_kv_head, n_head);
    return timed_op(ctx, "attention_forward",
                    [&] { cpu::attention_forward(ctx, out, att, qkv, n_head, dropout, n_kv_head); });
  }
  return ZT_OP(attention_forward, ctx, out, att, qkv, n_head, dropout);
}
void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout, int n_kv_head) {
  if (n_kv_head != 0 && n_kv_head != n_head) {
    ZT_CHECK(ctx.device != Device::kCUDA,
             "attention_backward: grouped-query heads ({} kv heads for {}) run on the CPU only", n_kv_head, n_head);
    return timed_op(ctx, "attention_backward",
                    [&] { cpu::attention_backward(ctx, dqkv, dout, qkv, att, n_head, dropout, n_kv_head); });
  }
  return ZT_OP(attention_backward, ctx, dqkv, dout, qkv, att, n_head, dropout);
}
bool cuda_kernels_built() {
#ifdef ZT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}
bool flash_attention_available(Device device, std::int64_t batch, std::int64_t n_head, std::int64_t head_size) {
#ifdef ZT_HAVE_CUDA
  return device == Device::kCUDA && cuda::flash_attention_supports(batch, n_head, head_size);
#else
  (void)device, (void)batch, (void)n_head, (void)head_size;
  return false;
#endif
}
bool flash_attention_on_tensor_cores(Device device, DType activations, std::int64_t head_size) {
#ifdef ZT_HAVE_CUDA
  return device == Device::kCUDA && cuda::flash_attention_tensor_cores(activations, head_size);
#else
  (void)device, (void)activations, (void)head_size;
  return false;
#endif
}
std::string cudnn_attention_refuses(Device device, AttentionKernels choice, DType activations, std::int64_t head_size,
                                    bool dropout) {
  if (device != Device::kCUDA) return "the CPU has no cuDNN";
  if (choice == AttentionKernels::kFlash) return "precision.attention = \"flash\"";
#ifdef ZT_HAVE_CUDA
  std::string why = cuda::cudnn_attention_unavailable();
  return why.empty() ? cuda::cudnn_attention_refuses(activations, head_size, dropout) : why;
#else
  (void)activations, (void)head_size, (void)dropout;
  return "this build has no CUDA kernels";
#endif
}

#ifdef ZT_HAVE_CUDA
namespace {

// Whether this call of fused attention runs on cuDNN. Reasons the run's header already gave (the
// kind of operands) stay quiet; a shape or operand cuDNN turns down under "auto" is said once on
// stderr, and under "cudnn" it stops the run. "cudnn" is about the run's bf16 model (the config
// check holds it to bf16 activations): the fp32 batch-1 model the trainer and `zerotrain sample`
// build for text samples runs the flash kernels under either choice.
bool attention_on_cudnn(const ExecContext& ctx, const TensorView& qkv, int n_head, int n_kv_head,
                        const DropoutSpec& dropout, std::initializer_list<const void*> operands) {
  const AttentionKernels choice = ctx.cuda_resources->attention;
  if (qkv.dtype != DType::kBF16) return false;
  // qkv rows hold n_head query heads and n_kv_head (0: n_head) key and value heads of hs columns.
  const std::int64_t heads = n_head + 2 * static_cast<std::int64_t>(n_kv_head != 0 ? n_kv_head : n_head);
  const std::int64_t hs = qkv.shape.ndim() == 3 && n_head > 0 ? qkv.shape[2] / heads : 0;
  if (!cudnn_attention_refuses(Device::kCUDA, choice, qkv.dtype, hs, dropout.active()).empty()) {
    ZT_CHECK(choice != AttentionKernels::kCudnn, "precision.attention = \"cudnn\": {}",
             cudnn_attention_refuses(Device::kCUDA, choice, qkv.dtype, hs, dropout.active()));
    return false;
  }
  std::string why;
  if (cuda::cudnn_attention_serves(ctx, qkv.dtype, qkv.shape[0], qkv.shape[1], n_head, hs, dropout.active(), operands,
                                   &why, n_kv_head)) {
    return true;
  }
  if (choice == AttentionKernels::kCudnn) throw RuntimeError(fmt::format("precision.attention = \"cudnn\": {}", why));
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(why).second)
    fmt::print(stderr, "zerotrain: cuDNN attention: {}; the flash kernels run instead\n", why);
  return false;
}

}  // namespace
#endif

void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout, int n_kv_head) {
  ZT_CHECK(on_cuda(ctx), "flash attention runs on CUDA only (the CPU uses attention_forward)");
#ifdef ZT_HAVE_CUDA
  if (attention_on_cudnn(ctx, qkv, n_head, n_kv_head, dropout, {out.data, qkv.data, lse.data})) {
    timed_op(ctx, "cudnn_attention_forward",
             [&] { cuda::cudnn_attention_forward(ctx, out, lse, qkv, n_head, n_kv_head); });
    return;
  }
  timed_op(ctx, "flash_attention_forward",
           [&] { cuda::flash_attention_forward(ctx, out, lse, qkv, n_head, dropout, n_kv_head); });
#else
  (void)out, (void)lse, (void)qkv, (void)n_head, (void)dropout, (void)n_kv_head;  // on_cuda has thrown
#endif
}
void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout, int n_kv_head) {
  ZT_CHECK(on_cuda(ctx), "flash attention runs on CUDA only (the CPU uses attention_backward)");
#ifdef ZT_HAVE_CUDA
  if (attention_on_cudnn(ctx, qkv, n_head, n_kv_head, dropout, {dqkv.data, dout.data, out.data, qkv.data, lse.data})) {
    timed_op(ctx, "cudnn_attention_backward",
             [&] { cuda::cudnn_attention_backward(ctx, dqkv, dout, out, qkv, lse, n_head, n_kv_head); });
    return;
  }
  timed_op(ctx, "flash_attention_backward",
           [&] { cuda::flash_attention_backward(ctx, dqkv, dout, out, qkv, lse, n_head, dropout, n_kv_head); });
#else
  (void)dqkv, (void)dout, (void)out, (void)qkv, (void)lse, (void)n_head, (void)dropout, (void)n_kv_head;
#endif
}
void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) { return ZT_OP(gelu_forward, ctx, out, inp); }
void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) {
  return ZT_OP(gelu_backward, ctx, dinp, inp, dout);
}

#ifdef ZT_HAVE_CUDA
namespace {
// cuBLASLt's GELU epilogues under precision.gelu_epilogue, for widths they take (a multiple of 8).
bool gelu_in_epilogue(const ExecContext& ctx, TensorView gelu_pre) {
  return on_cuda(ctx) && ctx.cuda_resources->gelu_epilogue && gelu_pre.shape.ndim() > 0 &&
         gelu_pre.shape[gelu_pre.shape.ndim() - 1] % 8 == 0;
}
}  // namespace
#endif

void matmul_gelu_forward(const ExecContext& ctx, TensorView out, TensorView gelu_pre, TensorView inp, TensorView weight,
                         WeightLayout layout, TensorView bias) {
#ifdef ZT_HAVE_CUDA
  if (gelu_in_epilogue(ctx, gelu_pre)) {
    timed_op(ctx, "matmul_gelu_forward", [&] { cuda::matmul_forward(ctx, out, inp, weight, layout, bias, gelu_pre); });
    return;
  }
#endif
  ops::matmul_forward(ctx, gelu_pre, inp, weight, layout, bias);
  ops::gelu_forward(ctx, out, gelu_pre);
}

bool adds_param_grads_into(const ExecContext& ctx, DType grad_dtype, DType act_dtype) {
  if (grad_dtype == DType::kF32) return true;
  return ctx.device == Device::kCUDA && grad_dtype == DType::kBF16 && act_dtype == DType::kBF16;
}

void matmul_backward_through_gelu(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                                  TensorView dout, TensorView inp, TensorView weight, WeightLayout layout,
                                  TensorView gelu_pre) {
#ifdef ZT_HAVE_CUDA
  if (gelu_in_epilogue(ctx, gelu_pre)) {
    timed_op(ctx, "matmul_backward_through_gelu",
             [&] { cuda::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout, gelu_pre); });
    return;
  }
#endif
  ops::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout);
  ops::gelu_backward(ctx, dinp, gelu_pre, dinp);
}
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias) {
  return ZT_OP(layernorm_residual_forward, ctx, residual, out, mean, rstd, a, b, weight, bias);
}
void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps) {
  return ZT_OP(rmsnorm_forward, ctx, out, rstd, inp, weight, eps);
}
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd) {
  return ZT_OP(rmsnorm_backward, ctx, dinp, dweight, dout, inp, weight, rstd);
}
void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, float theta) {
  return ZT_OP(rope_forward, ctx, x, n_heads, head_size, theta);
}
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, float theta) {
  return ZT_OP(rope_backward, ctx, dx, n_heads, head_size, theta);
}
void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) {
  return ZT_OP(swiglu_forward, ctx, out, gate_up);
}
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout) {
  return ZT_OP(swiglu_backward, ctx, dgate_up, gate_up, dout);
}
void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) {
  return ZT_OP(residual_forward, ctx, out, a, b);
}

void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) {
  return ZT_OP(dropout_forward, ctx, out, in, spec);
}
void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec) {
  return ZT_OP(dropout_backward, ctx, dinp, dout, spec);
}

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_forward, ctx, losses, probs, logits, targets, vocab_size);
}
void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_backward, ctx, dlogits, probs, targets, dloss, vocab_size);
}
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_fused, ctx, losses, dlogits, logits, targets, dloss, vocab_size);
}

void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first) {
  return ZT_OP(cross_entropy_chunk_stats, ctx, row_max, row_sum, target_logit, logits, targets, begin, vocab_size,
               first);
}
void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit) {
  return ZT_OP(cross_entropy_chunk_loss, ctx, losses, lse, row_max, row_sum, target_logit);
}
void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size) {
  return ZT_OP(cross_entropy_chunk_backward, ctx, dlogits, logits, lse, targets, begin, dloss, vocab_size);
}

void cast(const ExecContext& ctx, TensorView dst, TensorView src) { return ZT_OP(cast, ctx, dst, src); }
void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) {
  return ZT_OP(accumulate_into, ctx, dst, src);
}
double sum_of_squares(const ExecContext& ctx, TensorView x) { return ZT_OP(sum_of_squares, ctx, x); }
std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  return ZT_OP(sum_of_squares_each, ctx, xs);
}
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) {
  return ZT_OP(adamw_update, ctx, param, grad, m, v, working_out, hyper, step, grad_scale);
}

void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale) {
  return ZT_OP(adamw_update_slices, ctx, slices, hyper, step, grad_scale);
}

}  // namespace zt::ops
