// The kernels as the model, the parameter store and the optimizer call them: each op runs on the
// backend of ctx.device (the CPU's or CUDA's OpsBackend) and is timed when ctx carries a profiler.
// Each op's contract is stated once, in kernels/contracts/ops_backend.h; here are only what the
// free functions add (defaults, the fused ops composed from separate ones, capability queries by
// device). Also the memory operations those callers need on either side: allocation in the
// context's memory, zero-fill and copies between host and device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/tensor.h"
#include "kernels/contracts/adamw_params.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/contracts/exact_square_sum.h"
#include "kernels/contracts/rope_angles.h"
#include "kernels/contracts/weight_layout.h"
#include "kernels/exec_context.h"

namespace zt {
class OpsBackend;  // kernels/contracts/ops_backend.h
}  // namespace zt

namespace zt::ops {

using zt::AdamWHyper;
using zt::DropoutSpec;
using zt::WeightLayout;

// ---- memory ----
// `numel` elements in the context's memory: the host, or ctx.allocator's device.
Buffer allocate(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
                bool zero_fill = true);
// `numel` elements of host memory that ctx's device copies to and from: page-locked on a CUDA
// context (so a device copy into it runs at full speed), plain host memory otherwise.
Buffer allocate_host(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype,
                     std::int64_t numel, bool zero_fill = true);
void fill_zero(const ExecContext& ctx, TensorView x);
// dst = src (same dtype and numel), each on the host or the context's device. On CUDA it is
// ordered on ctx's stream, and a copy to the host has completed when it returns.
void copy(const ExecContext& ctx, TensorView dst, TensorView src);
// `v` itself when it is in host memory; otherwise a host copy of it in `staging` (resized to hold
// it; any dtype), valid until `staging` changes. For reading device results on the host.
TensorView on_host(const ExecContext& ctx, TensorView v, std::vector<float>& staging);
// Waits for everything queued on the context (a no-op on the CPU).
void synchronize(const ExecContext& ctx);

// ---- layers (contracts: OpsBackend in kernels/contracts/ops_backend.h) ----
void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);
// One chunk of a token table split by vocabulary rows.
void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab);
void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab);
void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias);
// residual = a + b, then out = layernorm(residual) (residual may alias a or b): one pass over
// memory fewer on CUDA.
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias);
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd);
// Whether the backward ops on ctx's device add parameter gradients into views of `grad_dtype` under
// activations of `act_dtype`: F32 everywhere; BF16 on CUDA with bf16 activations.
bool adds_param_grads_into(const ExecContext& ctx, DType grad_dtype, DType act_dtype);
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias);
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout);
// out = gelu(gelu_pre), gelu_pre = inp @ W + bias (kept for the backward); and the backward of a
// matmul whose input was such an out: dinp = (dout @ W^T) * gelu'(gelu_pre), with dweight and
// dbias as matmul_backward. Fused where the backend fuses it (OpsBackend::fuses_gelu_into_matmul:
// CUDA under precision.gelu_epilogue, in cuBLASLt's epilogue), profiled as one op; otherwise, and
// on the CPU, matmul_forward then gelu_forward, matmul_backward then gelu_backward.
void matmul_gelu_forward(const ExecContext& ctx, TensorView out, TensorView gelu_pre, TensorView inp, TensorView weight,
                         WeightLayout layout, TensorView bias);
void matmul_backward_through_gelu(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                                  TensorView dout, TensorView inp, TensorView weight, WeightLayout layout,
                                  TensorView gelu_pre);
// out = residual + inp @ W + bias, residual shaped and typed as out and apart from it: one product
// with the residual in its epilogue where the backend fuses it (fuses_residual_into_matmul below:
// CUDA), profiled as matmul_residual_forward; otherwise matmul_forward then residual_forward.
void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                             WeightLayout layout, TensorView bias, TensorView residual);
// Whether matmul_residual_forward into `out` with `bias` runs as one op on ctx's device (the GPT-2
// block then adds its attention residual there instead of in the LayerNorm after it).
bool fuses_residual_into_matmul(const ExecContext& ctx, TensorView out, TensorView bias);
// n_kv_head (0: n_head) below n_head: grouped-query heads, on the CPU only so far (a CUDA context
// refuses it).
void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout, int n_kv_head = 0);
void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout, int n_kv_head = 0);
// Whether `device` has a cached_attention_forward for heads of `head_size` (the CPU any; CUDA up
// to 256).
bool cached_attention_available(Device device, std::int64_t head_size);
// Attention of the last Tq positions of a key/value cache [B, P, W] of qkv rows over the cache's
// positions so far, into out [B, Tq, C] (OpsBackend::cached_attention_forward): decoding.
void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head, int n_kv_head = 0);
// Whether this build has the CUDA kernels (nvcc was found): without them device "cuda" runs nothing.
bool cuda_kernels_built();
// Flash attention: the result of attention_forward without the [B, n_head, T, T] probabilities
// (OpsBackend's fused attention). CUDA only (some head sizes, batch * n_head <= 65535): where
// flash_attention_available is false the model uses attention_forward/backward.
bool flash_attention_available(Device device, std::int64_t batch, std::int64_t n_head, std::int64_t head_size);
// Whether flash attention on `device` runs on tensor cores (BF16 activations, head sizes 16-128
// that the current GPU grants the shared memory for).
bool flash_attention_on_tensor_cores(Device device, DType activations, std::int64_t head_size);
// Why cuDNN's fused attention would not run flash attention's calls of this kind on `device`, or ""
// when it would: the device or build, precision.attention, the
// library, the activation dtype, the head size, dropout. A shape cuDNN has no plan for shows only
// at its first call, which then runs on the flash kernels and says so once on stderr.
std::string cudnn_attention_refuses(Device device, AttentionKernels choice, DType activations, std::int64_t head_size,
                                    bool dropout);
// Both run on the kernels the backend picks per call (OpsBackend::fused_attention_path: cuDNN
// where it serves the call under precision.attention, the flash kernels otherwise); the profiler
// names which.
// Grouped-query heads: n_kv_head key/value heads (0: n_head), on either.
void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout, int n_kv_head = 0);
void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout, int n_kv_head = 0);
void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp);
void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout);
// RMSNorm (Llama's): out = inp * rstd * weight, and its backward.
void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps);
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd);
// Rotary position embeddings in place on the first n_heads heads of each [B, T, W] row, and the
// backward.
// first_position: the position of x's row 0 (a decoding step's rows follow the cached ones).
void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position = 0);
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq);
// SwiGLU (Llama's MLP) on the fused gate and up output [N, 2H].
void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up);
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout);
void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b);
void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec);
void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec);
void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size);
void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size);
// Both of the above at once for a training step: one pass over the logits on CUDA instead of four.
void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size);
// Softmax + cross-entropy over vocabulary chunks: the
// online row statistics of each chunk of logits, the losses and log-sum-exps after the last, and
// each chunk's gradient from them.
void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first);
void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit);
void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size);

// ---- parameter store and optimizer ----
void cast(const ExecContext& ctx, TensorView dst, TensorView src);
void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src);
void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed);
void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate = false);
void scale(const ExecContext& ctx, TensorView x, float factor);
double sum_of_squares(const ExecContext& ctx, TensorView x);
std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs);
exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs);
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale);
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale);

// For tests: CPU contexts run on `backend` (cpu::residual_fusing_ops_backend) while the guard lives,
// so the models' branches that only a device's backend takes run on the CPU. Guards nest; none may
// live while another thread runs ops.
class ScopedCpuBackend {
 public:
  explicit ScopedCpuBackend(const OpsBackend& backend);
  ~ScopedCpuBackend();
  ScopedCpuBackend(const ScopedCpuBackend&) = delete;
  ScopedCpuBackend& operator=(const ScopedCpuBackend&) = delete;

 private:
  const OpsBackend* previous_;
};

}  // namespace zt::ops
