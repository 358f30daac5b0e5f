// The ops as their callers see them: each call runs on the backend of ctx.device
// (kernels/contracts/ops_backend.h) and, with a profiler on the context inside a step, is timed
// under the op's name (memory ops included, allocation excepted). The fused ops a backend may lack
// (matmul + GELU, fused attention) are composed here from what the backend says it runs, so the
// profile names the kernels that ran.
#include "kernels/ops.h"

#include "engine/base/core/check.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/contracts/ops_backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/op_profiler.h"

namespace zt::ops {

namespace {

// ScopedCpuBackend's, in tests; null otherwise.
const OpsBackend* cpu_override = nullptr;

// The backend of `device`: the CPU's (or the tests' stand-in), or CUDA's where this build has it
// (null otherwise: CMake compiles kernels/no_cuda_backend.cpp instead of kernels/cuda/).
const OpsBackend* find_backend(Device device) {
  if (device == Device::kCUDA) return cuda::ops_backend();
  return cpu_override != nullptr ? cpu_override : &cpu::ops_backend();
}

// ctx's backend, checked against ctx. A CUDA context in a build without CUDA is a programming
// error: the config refuses device = cuda there before anything is built.
const OpsBackend& backend(const ExecContext& ctx) {
  const OpsBackend* b = find_backend(ctx.device);
  if (b == nullptr) throw InternalError("a CUDA kernel was requested, but this build has no CUDA backend");
  b->check_context(ctx);
  return *b;
}

}  // namespace

// The op's result (or void) from ctx's backend, timed under the op's name when ctx carries a
// profiler inside a step (kernels/op_profiler.h): `return ZT_OP(op, args...)`, ctx first.
#define ZT_OP(name, ...) timed_op(ctx, #name, [&] { return backend(ctx).name(ctx, __VA_ARGS__); })

// ---- memory ----

Buffer allocate(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
                bool zero_fill) {
  return backend(ctx).allocate(ctx, tracker, category, dtype, numel, zero_fill);
}
Buffer allocate_host(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype,
                     std::int64_t numel, bool zero_fill) {
  if (ctx.host_staging != nullptr) return Buffer(tracker, category, dtype, numel, *ctx.host_staging, zero_fill);
  return Buffer(tracker, category, dtype, numel, Device::kCPU, zero_fill);
}
void fill_zero(const ExecContext& ctx, TensorView x) {
  if (x.numel() == 0) return;
  return ZT_OP(fill_zero, x);
}
void copy(const ExecContext& ctx, TensorView dst, TensorView src) {
  ZT_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy of {} {} elements into {} {}", src.numel(),
           dtype_name(src.dtype), dst.numel(), dtype_name(dst.dtype));
  if (dst.numel() == 0 || dst.data == src.data) return;
  return ZT_OP(copy, dst, src);
}
TensorView on_host(const ExecContext& ctx, TensorView v, std::vector<float>& staging) {
  if (v.device == Device::kCPU) return v;
  staging.resize((v.size_bytes() + sizeof(float) - 1) / sizeof(float));
  const TensorView host{staging.data(), v.dtype, Device::kCPU, v.shape};
  copy(ctx, host, v);
  return host;
}
void synchronize(const ExecContext& ctx) { backend(ctx).synchronize(ctx); }

// ---- layers ----

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  return ZT_OP(embedding_forward, out, tokens, wte, wpe);
}
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  return ZT_OP(embedding_backward, dwte, dwpe, dout, tokens);
}
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab) {
  return ZT_OP(embedding_forward_rows, out, tokens, wte_rows, wpe, row_begin, vocab);
}
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab) {
  return ZT_OP(embedding_backward_rows, dwte_rows, dwpe, dout, tokens, row_begin, vocab);
}
void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  return ZT_OP(layernorm_forward, out, mean, rstd, inp, weight, bias);
}
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias) {
  return ZT_OP(layernorm_residual_forward, residual, out, mean, rstd, a, b, weight, bias);
}
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd) {
  return ZT_OP(layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}
bool adds_param_grads_into(const ExecContext& ctx, DType grad_dtype, DType act_dtype) {
  return backend(ctx).adds_param_grads_into(grad_dtype, act_dtype);
}
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias) {
  return ZT_OP(matmul_forward, out, inp, weight, layout, bias);
}
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout) {
  return ZT_OP(matmul_backward, dinp, dweight, dbias, dout, inp, weight, layout);
}
// Fused where the backend fuses it (timed as one op), else the two ops, each timed as itself.
void matmul_gelu_forward(const ExecContext& ctx, TensorView out, TensorView gelu_pre, TensorView inp, TensorView weight,
                         WeightLayout layout, TensorView bias) {
  if (backend(ctx).fuses_gelu_into_matmul(ctx, gelu_pre)) {
    return ZT_OP(matmul_gelu_forward, out, gelu_pre, inp, weight, layout, bias);
  }
  ops::matmul_forward(ctx, gelu_pre, inp, weight, layout, bias);
  ops::gelu_forward(ctx, out, gelu_pre);
}
void matmul_backward_through_gelu(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                                  TensorView dout, TensorView inp, TensorView weight, WeightLayout layout,
                                  TensorView gelu_pre) {
  if (backend(ctx).fuses_gelu_into_matmul(ctx, gelu_pre)) {
    return ZT_OP(matmul_backward_through_gelu, dinp, dweight, dbias, dout, inp, weight, layout, gelu_pre);
  }
  ops::matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, layout);
  ops::gelu_backward(ctx, dinp, gelu_pre, dinp);
}
void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                             WeightLayout layout, TensorView bias, TensorView residual) {
  // The two ops would overwrite a residual that is out before adding it.
  ZT_CHECK(residual.data != out.data, "matmul_residual_forward: the residual must be apart from out");
  if (backend(ctx).fuses_residual_into_matmul(ctx, out, bias)) {
    return ZT_OP(matmul_residual_forward, out, inp, weight, layout, bias, residual);
  }
  ops::matmul_forward(ctx, out, inp, weight, layout, bias);
  ops::residual_forward(ctx, out, out, residual);
}
bool fuses_residual_into_matmul(const ExecContext& ctx, TensorView out, TensorView bias) {
  return backend(ctx).fuses_residual_into_matmul(ctx, out, bias);
}
void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout, int n_kv_head) {
  return ZT_OP(attention_forward, out, att, qkv, n_head, dropout, n_kv_head);
}
void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout, int n_kv_head) {
  return ZT_OP(attention_backward, dqkv, dout, qkv, att, n_head, dropout, n_kv_head);
}
bool cached_attention_available(Device device, std::int64_t head_size) {
  const OpsBackend* b = find_backend(device);
  return b != nullptr && b->cached_attention_supports(head_size);
}
void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head) {
  return ZT_OP(cached_attention_forward, out, cache, n_head, n_kv_head);
}
bool cuda_kernels_built() { return cuda::ops_backend() != nullptr; }
// [Note: a GPU run's routes in a build without CUDA]
// `zerotrain memory` and `plan` predict a GPU run on any machine: where this build has no CUDA
// kernels, the routes a CUDA build would take come from the contracts' rules (the flash kernels'
// shapes, cuDNN's operands, as on a machine where cuDNN loads), not from an absent backend (which
// predicted the materialised scores). Such a build never runs them: a device = "cuda" run is
// refused at its start.
bool flash_attention_available(Device device, std::int64_t batch, std::int64_t n_head, std::int64_t head_size) {
  if (const OpsBackend* b = find_backend(device)) return b->flash_attention_supports(batch, n_head, head_size);
  return device == Device::kCUDA && flash_attention_shape_supported(batch, n_head, head_size);
}
bool flash_attention_on_tensor_cores(Device device, DType activations, std::int64_t head_size) {
  if (const OpsBackend* b = find_backend(device)) return b->flash_attention_on_tensor_cores(activations, head_size);
  // As on sm_90, which grants the tensor-core kernels' shared memory at every head size they take.
  return device == Device::kCUDA && activations == DType::kBF16 && flash_attention_tc_head_size(head_size);
}
std::string cudnn_attention_refuses(Device device, AttentionKernels choice, DType activations, std::int64_t head_size,
                                    bool dropout) {
  if (const OpsBackend* b = find_backend(device)) {
    return b->cudnn_attention_refuses(choice, activations, head_size, dropout);
  }
  // Only CUDA can be missing; the config's choice is named first, as the CUDA backend names it.
  if (choice == AttentionKernels::kFlash) return "precision.attention = \"flash\"";
  return cudnn_attention_shape_refuses(activations, head_size, dropout);
}
// On the kernels the backend picks for this call, timed under their name (cuDNN or flash).
void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout, int n_kv_head) {
  const FusedAttentionPath path =
      backend(ctx).fused_attention_path(ctx, qkv, n_head, n_kv_head, dropout, {out.data, qkv.data, lse.data});
  ZT_CHECK(path != FusedAttentionPath::kNone, "flash attention runs on CUDA only (the CPU uses attention_forward)");
  if (path == FusedAttentionPath::kCudnn) return ZT_OP(cudnn_attention_forward, out, lse, qkv, n_head, n_kv_head);
  return ZT_OP(flash_attention_forward, out, lse, qkv, n_head, dropout, n_kv_head);
}
void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout, int n_kv_head) {
  const FusedAttentionPath path = backend(ctx).fused_attention_path(
      ctx, qkv, n_head, n_kv_head, dropout, {dqkv.data, dout.data, out.data, qkv.data, lse.data});
  ZT_CHECK(path != FusedAttentionPath::kNone, "flash attention runs on CUDA only (the CPU uses attention_backward)");
  if (path == FusedAttentionPath::kCudnn) {
    return ZT_OP(cudnn_attention_backward, dqkv, dout, out, qkv, lse, n_head, n_kv_head);
  }
  return ZT_OP(flash_attention_backward, dqkv, dout, out, qkv, lse, n_head, dropout, n_kv_head);
}
void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) { return ZT_OP(gelu_forward, out, inp); }
void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) {
  return ZT_OP(gelu_backward, dinp, inp, dout);
}
void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps) {
  return ZT_OP(rmsnorm_forward, out, rstd, inp, weight, eps);
}
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd) {
  return ZT_OP(rmsnorm_backward, dinp, dweight, dout, inp, weight, rstd);
}
void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position) {
  ZT_CHECK(first_position >= 0, "rope_forward: first position {} is negative", first_position);
  return ZT_OP(rope_forward, x, n_heads, head_size, freq, first_position);
}
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq) {
  return ZT_OP(rope_backward, dx, n_heads, head_size, freq);
}
void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) {
  return ZT_OP(swiglu_forward, out, gate_up);
}
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout) {
  return ZT_OP(swiglu_backward, dgate_up, gate_up, dout);
}
void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) {
  return ZT_OP(residual_forward, out, a, b);
}
void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) {
  return ZT_OP(dropout_forward, out, in, spec);
}
void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec) {
  return ZT_OP(dropout_backward, dinp, dout, spec);
}
void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_forward, losses, probs, logits, targets, vocab_size);
}
void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_backward, dlogits, probs, targets, dloss, vocab_size);
}
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size) {
  return ZT_OP(softmax_cross_entropy_fused, losses, dlogits, logits, targets, dloss, vocab_size);
}
void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first) {
  return ZT_OP(cross_entropy_chunk_stats, row_max, row_sum, target_logit, logits, targets, begin, vocab_size, first);
}
void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit) {
  return ZT_OP(cross_entropy_chunk_loss, losses, lse, row_max, row_sum, target_logit);
}
void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size) {
  return ZT_OP(cross_entropy_chunk_backward, dlogits, logits, lse, targets, begin, dloss, vocab_size);
}

// ---- parameter store and optimizer ----

void cast(const ExecContext& ctx, TensorView dst, TensorView src) { return ZT_OP(cast, dst, src); }
void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) {
  return ZT_OP(accumulate_into, dst, src);
}
double sum_of_squares(const ExecContext& ctx, TensorView x) { return ZT_OP(sum_of_squares, x); }
void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) {
  return ZT_OP(quantize_int8_blocks, src, packed);
}
void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate) {
  return ZT_OP(dequantize_int8_blocks, packed, dst, accumulate);
}
void scale(const ExecContext& ctx, TensorView x, float factor) { return ZT_OP(scale, x, factor); }
std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  return ZT_OP(sum_of_squares_each, xs);
}
exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  return ZT_OP(exact_sum_of_squares, xs);
}
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) {
  return ZT_OP(adamw_update, param, grad, m, v, working_out, hyper, step, grad_scale);
}
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale) {
  return ZT_OP(adamw_update_slices, slices, hyper, step, grad_scale);
}

ScopedCpuBackend::ScopedCpuBackend(const OpsBackend& backend) : previous_(cpu_override) { cpu_override = &backend; }
ScopedCpuBackend::~ScopedCpuBackend() { cpu_override = previous_; }

}  // namespace zt::ops
