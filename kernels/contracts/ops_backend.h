// The interface every compute backend implements (the CPU's in kernels/cpu/cpu_backend, CUDA's in
// kernels/cuda/cuda_backend), and the one statement of each op's contract: shapes, dtypes, what
// it writes or adds into, and what is deterministic. kernels/ops picks the backend from ctx.device
// and times each call; the kernels' own headers state only what is particular to them.
#pragma once

#include <cstdint>
#include <initializer_list>
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

// Which kernels run one call of fused attention (OpsBackend::fused_attention_path).
enum class FusedAttentionPath { kNone, kFlash, kCudnn };

// [Note: op contracts]
// Common to every op unless its entry says otherwise:
// - Rows are all leading dimensions flattened: x [.., C] is read as [N, C].
// - Activations (inputs, outputs and their gradients) share one dtype per call, F32 or BF16
//   (activation_dtype); math is fp32 and a BF16 result is rounded once, to nearest even
//   (docs/precision.md). Parameters (weights, biases, tables) are F32, or BF16 with BF16
//   activations (check_param_dtype); saved statistics (mean, rstd, lse, losses) are F32;
//   parameter gradients are F32 unless adds_param_grads_into says the backend adds into BF16.
// - "Overwritten" outputs are written whole; "+=" outputs are added into, so they must hold a
//   value (a residual gradient already there, or zeros).
// - Parameter-gradient sums run in a fixed order: the same inputs give the same bits at any thread
//   count. The CUDA kernels use no float atomics except where an entry says so.
// - Token and target ids are I32. The CPU throws InternalError on one out of range; CUDA does not
//   look on the host (a sync) and yields NaN rows instead, which the trainer's non-finite check
//   stops on.
class OpsBackend {
 public:
  virtual ~OpsBackend() = default;
  // "cpu" or "cuda", for messages.
  virtual const char* name() const = 0;
  // Fails (InternalError) when ctx lacks what this backend's kernels need. Optional: the CPU's
  // needs nothing.
  virtual void check_context(const ExecContext& ctx) const;

  // ---- memory ----
  // `numel` elements in ctx's memory (the host, or ctx.allocator's device), zeroed if asked.
  virtual Buffer allocate(const ExecContext& ctx, MemoryTracker& tracker, MemCategory category, DType dtype,
                          std::int64_t numel, bool zero_fill) const = 0;
  virtual void fill_zero(const ExecContext& ctx, TensorView x) const = 0;
  // dst = src, same dtype and numel, distinct; each on the host or ctx's device. Ordered on ctx's
  // stream, and complete on return when dst is on the host.
  virtual void copy(const ExecContext& ctx, TensorView dst, TensorView src) const = 0;
  // Waits for everything queued on ctx.
  virtual void synchronize(const ExecContext& ctx) const = 0;

  // ---- embedding ----
  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]; tokens [B, T], wte [Vp, C], wpe [max_T, C]
  // with T <= max_T, or a wpe without data (no position table: a rotary model's embedding). The
  // sum is taken in fp32 (embedding_dims).
  virtual void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte,
                                 TensorView wpe) const = 0;
  // dwte[tokens[b, t], :] += dout[b, t, :], dwpe[t, :] += dout[b, t, :] summed over b; dwte and
  // dwpe F32. Each row summed in (b, t) order: the CPU's and CUDA's bits are equal.
  virtual void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout,
                                  TensorView tokens) const = 0;
  // One chunk of a token table split by vocabulary rows: wte_rows [R, C] holds rows [row_begin,
  // row_begin + R) of `vocab`. Writes out[b, t, :] for the positions whose token is in the chunk
  // and leaves the others: over all the chunks each position is written once, with
  // embedding_forward's bits.
  virtual void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                                      TensorView wpe, std::int64_t row_begin, std::int64_t vocab) const = 0;
  // dwte_rows += dout for the chunk's positions and, when dwpe is not empty, dwpe += dout for every
  // position, in (b, t) order: the chunks together give embedding_backward's bits.
  virtual void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                                       TensorView tokens, std::int64_t row_begin, std::int64_t vocab) const = 0;

  // ---- normalisation ----
  // LayerNorm, eps kLayerNormEps: out[N, C] = (inp - mean) * rstd * weight + bias; mean[N] and
  // rstd[N] saved for the backward.
  virtual void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd,
                                 TensorView inp, TensorView weight, TensorView bias) const = 0;
  // residual = a + b (as residual_forward; residual may alias a or b), then out =
  // layernorm(residual) as above, the stored (rounded) residual being what is normalised.
  virtual void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                          TensorView rstd, TensorView a, TensorView b, TensorView weight,
                                          TensorView bias) const = 0;
  // dinp += d/dinp, dweight += , dbias += .
  virtual void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                                  TensorView dout, TensorView inp, TensorView weight, TensorView mean,
                                  TensorView rstd) const = 0;
  // RMSNorm (Llama's): out[N, C] = inp * rstd * weight, rstd[N] = 1 / sqrt(mean(inp^2) + eps)
  // saved; no mean subtracted, no bias.
  virtual void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp,
                               TensorView weight, float eps) const = 0;
  // With norm = inp * rstd, dnorm = dout * weight: dinp += rstd * (dnorm - norm * mean(dnorm *
  // norm)), dweight += the sum over rows of dout * norm.
  virtual void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout,
                                TensorView inp, TensorView weight, TensorView rstd) const = 0;

  // ---- linear layers ----
  // out[N, OC] = inp[N, C] @ W + bias[OC] (bias may be empty), W stored as `layout` says.
  virtual void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                              WeightLayout layout, TensorView bias) const = 0;
  // dinp = dout @ W^T (overwritten; skipped when empty), dweight += inp^T @ dout in the weight's
  // layout, dbias[OC] += column sums of dout (skipped when empty).
  virtual void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias,
                               TensorView dout, TensorView inp, TensorView weight, WeightLayout layout) const = 0;
  // Whether matmul_backward, matmul_backward_through_gelu, layernorm_backward and rmsnorm_backward
  // add parameter gradients into views of `grad_dtype` under `act_dtype` activations: F32 always;
  // BF16 (each element rounded once: round(widen(old) + contribution)) where the backend says so.
  virtual bool adds_param_grads_into(DType grad_dtype, DType act_dtype) const = 0;
  // Whether this matmul + GELU runs fused in one product (matmul_gelu_forward and
  // matmul_backward_through_gelu below); otherwise the caller runs the separate ops. Optional:
  // false unless the backend has a fused kernel.
  virtual bool fuses_gelu_into_matmul(const ExecContext& ctx, TensorView gelu_pre) const;
  // Optional, where fuses_gelu_into_matmul: gelu_pre = inp @ W + bias (kept for the backward), out
  // = gelu(gelu_pre) (BF16: gelu of the unrounded product, one rounding fewer than the two ops).
  virtual void matmul_gelu_forward(const ExecContext& ctx, TensorView out, TensorView gelu_pre, TensorView inp,
                                   TensorView weight, WeightLayout layout, TensorView bias) const;
  // Optional, likewise: dinp = (dout @ W^T) * gelu'(gelu_pre), dweight and dbias as matmul_backward.
  virtual void matmul_backward_through_gelu(const ExecContext& ctx, TensorView dinp, TensorView dweight,
                                            TensorView dbias, TensorView dout, TensorView inp, TensorView weight,
                                            WeightLayout layout, TensorView gelu_pre) const;

  // Whether matmul_residual_forward below runs as one product (the residual added in its epilogue);
  // otherwise the caller runs matmul_forward then residual_forward. Optional: false unless the
  // backend fuses it.
  virtual bool fuses_residual_into_matmul(const ExecContext& ctx, TensorView out, TensorView bias) const;
  // Optional, where fuses_residual_into_matmul: out = residual + inp @ W + bias (residual shaped as
  // out, apart from it). BF16: the sum rounded once, not the product and then the sum.
  virtual void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                                       WeightLayout layout, TensorView bias, TensorView residual) const;

  // ---- attention (causal, after the qkv projection, before the output projection) ----
  // qkv [B, T, (n_head + 2 n_kv_head) hs] holds q | k | v, head h in columns [h hs, (h+1) hs) of
  // its part; n_kv_head 0 is n_head (qkv [B, T, 3C]); below it, query head h reads key/value head
  // h / (n_head / n_kv_head) (grouped-query; AttentionDims). out [B, T, n_head hs] (heads
  // concatenated), att [B, n_head, T, T] the softmax probabilities of q k^T / sqrt(hs) before
  // dropout, zero above the diagonal. An active `dropout` draws its mask per [Note: dropout masks]
  // over each sample's [n_head, T, T] probabilities (j = (h T + t) T + t2): out = dropout(att) @ v.
  // Grouped-query heads: the CPU only (a CUDA context refuses them).
  virtual void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                                 const DropoutSpec& dropout, int n_kv_head) const = 0;
  // dqkv (overwritten, shaped as qkv) from dout and the forward's qkv and att, the same dropout
  // regenerated; a key/value head's dk and dv sum its query heads' terms in head order.
  virtual void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv,
                                  TensorView att, int n_head, const DropoutSpec& dropout, int n_kv_head) const = 0;
  // Attention of a sequence's new positions over a cache of its keys and values (decoding):
  // cache [B, P, W] holds the qkv rows of positions 0..P-1, the last Tq of them new, and out
  // [B, Tq, C] gets their attention, position P - Tq + i attending to positions 0..P-Tq+i as
  // attention_forward's row would (the same scaled scores, softmax after subtracting the row's
  // maximum, no dropout); grouped-query heads as above, on either backend.
  virtual void cached_attention_forward(const ExecContext& ctx, TensorView out, TensorView cache, int n_head,
                                        int n_kv_head) const = 0;
  // Whether cached_attention_forward takes heads of `head_size` (the CPU's any).
  virtual bool cached_attention_supports(std::int64_t head_size) const;
  // Fused attention: attention_forward's out without the probabilities, keeping lse [B, n_head, T]
  // (F32, each row's log-sum-exp of the scaled scores, undropped) from which the backward
  // recomputes them; dropout fused. Optional, all below: the CPU has none.
  // Whether flash kernels serve these shapes (head size, grid limits).
  virtual bool flash_attention_supports(std::int64_t batch, std::int64_t n_head, std::int64_t head_size) const;
  // Whether they run on tensor cores for these activations and head size (which rounding to expect).
  virtual bool flash_attention_on_tensor_cores(DType activations, std::int64_t head_size) const;
  // Why cuDNN's fused attention would not serve calls of this kind under `choice`
  // (precision.attention), or "" when it would. A shape it has no plan for shows at its first call.
  virtual std::string cudnn_attention_refuses(AttentionKernels choice, DType activations, std::int64_t head_size,
                                              bool dropout) const = 0;
  // Which kernels run this call (kNone: the backend has no fused attention). `operands` are the
  // call's data pointers (cuDNN wants them aligned). May throw where ctx's precision.attention
  // insists on kernels that cannot serve it.
  virtual FusedAttentionPath fused_attention_path(const ExecContext& ctx, const TensorView& qkv, int n_head,
                                                  int n_kv_head, const DropoutSpec& dropout,
                                                  std::initializer_list<const void*> operands) const;
  virtual void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv,
                                       int n_head, const DropoutSpec& dropout, int n_kv_head) const;
  // dqkv (overwritten) from dout and the forward's out, qkv and lse; no atomics.
  virtual void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out,
                                        TensorView qkv, TensorView lse, int n_head, const DropoutSpec& dropout,
                                        int n_kv_head) const;
  // As the flash pair, without dropout, BF16 only (deterministic backward unless
  // train.deterministic is off: then dK and dV are added by atomics in any order).
  virtual void cudnn_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv,
                                       int n_head, int n_kv_head) const;
  virtual void cudnn_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out,
                                        TensorView qkv, TensorView lse, int n_head, int n_kv_head) const;

  // ---- element-wise ----
  // GELU, tanh approximation (GPT-2's "gelu_new"): out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
  // x^3))); out may alias inp.
  virtual void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) const = 0;
  // dinp = dout * gelu'(inp) (overwritten; may alias dout).
  virtual void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) const = 0;
  // SwiGLU on gate_up [N, 2H] (gate in columns [0, H), up in [H, 2H)): out [N, H] = silu(gate) *
  // up, silu(g) = g sigmoid(g).
  virtual void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) const = 0;
  // dgate_up = [dout * up * silu'(gate) | dout * silu(gate)] (overwritten; may alias gate_up).
  virtual void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up,
                               TensorView dout) const = 0;
  // Rotary embeddings (rotate-half) in place on the first n_heads heads of head_size (even)
  // columns of each row of x [B, T, W]: pair (x_i, x_{i + hs/2}) turns by (first_position + t) *
  // inv_freq_i, inv_freq_i = 1 / theta^(2i / hs), then freq.scaling (rope_angles); the backward
  // turns by minus the angle (of t: training's rows start at position 0). first_position >= 0
  // places a decoding step's rows after the positions already cached.
  virtual void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size,
                            const RopeFrequencies& freq, std::int64_t first_position) const = 0;
  virtual void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size,
                             const RopeFrequencies& freq) const = 0;
  // out = a + b (out may alias a or b).
  virtual void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) const = 0;
  // out = in * mask / (1 - p) over in's leading dimension of samples ([Note: dropout masks]; out
  // may alias in), and dinp = dout * mask / (1 - p) with the same mask regenerated.
  virtual void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in,
                               const DropoutSpec& spec) const = 0;
  virtual void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout,
                                const DropoutSpec& spec) const = 0;

  // ---- loss: softmax + cross-entropy over a padded vocabulary ----
  // Only the first vocab_size of the Vp columns enter the softmax; padded columns get probability
  // and gradient 0. targets [N] in [0, vocab_size).
  // losses[N] = -log softmax(logits[n, :vocab_size])[targets[n]], probs [N, Vp] that softmax
  // (may alias logits).
  virtual void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs,
                                             TensorView logits, TensorView targets, int vocab_size) const = 0;
  // dlogits = (probs - onehot(targets)) * dloss (overwritten; may alias probs); dloss is d(total
  // loss)/d(losses[n]), e.g. 1/N for the mean.
  virtual void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs,
                                              TensorView targets, float dloss, int vocab_size) const = 0;
  // The two above over the same logits for a training step (dlogits may alias logits): the
  // forward's losses, the backward's dlogits.
  virtual void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits,
                                           TensorView logits, TensorView targets, float dloss,
                                           int vocab_size) const = 0;
  // Over vocabulary chunks (docs/memory.md, "the head in vocabulary chunks"): `logits` [N, Vc] are
  // columns [begin, begin + Vc), widened to fp32. Folds them into the F32 row statistics [N]:
  // row_max, row_sum (of exp(x - max) over the real columns so far, each chunk's sum in fp64) and
  // target_logit once its chunk is seen; `first` sets them, later chunks rescale to the new max
  // (a chunk with no real column changes nothing).
  virtual void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum,
                                         TensorView target_logit, TensorView logits, TensorView targets,
                                         std::int64_t begin, int vocab_size, bool first) const = 0;
  // After the last chunk: losses = log(row_sum) + row_max - target_logit, lse = row_max +
  // log(row_sum) (may alias row_max).
  virtual void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                                        TensorView row_sum, TensorView target_logit) const = 0;
  // dlogits [N, Vc] = (exp(logits - lse) - [begin + j == targets[n]]) * dloss on the chunk's real
  // columns, 0 on padding (may alias logits).
  virtual void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits,
                                            TensorView lse, TensorView targets, std::int64_t begin, float dloss,
                                            int vocab_size) const = 0;

  // ---- parameter store and optimizer ----
  // dst = src converted (F32 <-> BF16 rounding to nearest even, NaN and Inf kept; equal dtypes
  // copy); same numel. The CPU's and CUDA's bits are equal.
  virtual void cast(const ExecContext& ctx, TensorView dst, TensorView src) const = 0;
  // dst += src: src F32, dst F32 or BF16 (the sum in fp32, then rounded).
  virtual void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) const = 0;
  // Quantized collectives (kernels/contracts/int8_blocks.h states the rule and the packed form):
  // packed (I32, int8_blocks::packed_words(n)) = the blockwise int8 form of src (F32 or BF16, n),
  // and back: dst (F32 or BF16, n) = the values packed holds, or dst (F32) += them under
  // `accumulate`. No fused multiply-adds: the CPU's and CUDA's bits are equal.
  virtual void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) const = 0;
  virtual void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst,
                                      bool accumulate) const = 0;
  // x *= factor, x F32 (an average's division: a sum times 1/N, as the communicators' kAvg does).
  virtual void scale(const ExecContext& ctx, TensorView x, float factor) const = 0;
  // sum(x^2) of an F32 or BF16 view in fp64 in a fixed order per backend (the same bits every run;
  // the CPU's and CUDA's agree to ~1e-15, not bitwise). Returns on the host: CUDA waits.
  virtual double sum_of_squares(const ExecContext& ctx, TensorView x) const = 0;
  // sum_of_squares of each view, the same values bit for bit (CUDA: one wait for all).
  virtual std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) const = 0;
  // The exact sum of x^2 over every element of every view (F32 or BF16), as the integer of
  // kernels/contracts/exact_square_sum.h: the same on every backend, whatever the partition of the
  // values or the order of the adds (deterministic mode's gradient norm). Returns on the host.
  virtual exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx,
                                                    const std::vector<TensorView>& xs) const = 0;
  // AdamW as torch.optim.AdamW: param (F32 master), m, v F32; grad F32 or BF16, times grad_scale;
  // step 1-based. param *= 1 - lr wd; m, v updated; param -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) +
  // eps). A non-empty working_out (F32 or BF16) receives the updated parameter. No fused
  // multiply-adds: the CPU's and CUDA's bits are equal.
  virtual void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                            TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) const = 0;
  // adamw_update of every slice (weight decay where a slice decays), the same bits as one call each.
  virtual void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices,
                                   const AdamWHyper& hyper, int step, float grad_scale) const = 0;
};

}  // namespace zt
