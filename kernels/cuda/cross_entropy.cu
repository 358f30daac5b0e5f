// Softmax + cross-entropy on the GPU, one block per row: max (block reduction), sum of
// exp(x - max) in fp64 (fixed-order block reduction, as the CPU keeps its sum in fp64), then one
// write pass. The row (200 KB at V = 50257) is read three times but stays in L2 between passes,
// so DRAM sees about one read and one write of the logits.
#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 1024;

enum class Output { kProbs, kGradient };

// Writes probs (kProbs) or (probs - onehot) * dloss (kGradient) into out; losses[row] in both.
template <Output kOut>
__global__ void softmax_ce_kernel(float* losses, float* out, const float* logits, const std::int32_t* targets,
                                  int Vp, int V, float dloss) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * Vp;
  float* o = out + row * Vp;  // may be x: each element is read before the same thread writes it
  const std::int32_t target = targets[row];
  const bool target_ok = target >= 0 && target < V;
  const float target_logit = target_ok ? x[target] : NAN;  // read before any write to the row
  float mx = -INFINITY;
  for (int v = threadIdx.x; v < V; v += kThreads) mx = fmaxf(mx, x[v]);
  mx = detail::block_max(mx, shared_f);
  double sum = 0.0;
  for (int v = threadIdx.x; v < V; v += kThreads) sum += static_cast<double>(expf(x[v] - mx));
  sum = detail::block_sum(sum, shared_d);
  // All threads have read target_logit and finished their reads of x in the passes above; the
  // block_sum barrier orders them before the writes below.
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int v = threadIdx.x; v < Vp; v += kThreads) {
    float p = v < V ? expf(x[v] - mx) * inv_sum : 0.0f;
    if (kOut == Output::kGradient && v < V) p = (p - (v == target ? 1.0f : 0.0f)) * dloss;
    o[v] = p;
  }
  if (threadIdx.x == 0) {
    losses[row] = static_cast<float>(log(sum) - (static_cast<double>(target_logit) - static_cast<double>(mx)));
  }
}

__global__ void softmax_ce_backward_kernel(float* dlogits, const float* probs, const std::int32_t* targets, int Vp,
                                           int V, float dloss) {
  __shared__ float target_prob;
  const std::int64_t row = blockIdx.x;
  const float* p = probs + row * Vp;
  float* d = dlogits + row * Vp;  // may alias p: the target's probability is read first
  const std::int32_t target = targets[row];
  if (threadIdx.x == 0) target_prob = (target >= 0 && target < V) ? p[target] : NAN;
  __syncthreads();
  for (int v = threadIdx.x; v < Vp; v += kThreads) {
    float g = 0.0f;
    if (v < V) g = v == target ? (target_prob - 1.0f) * dloss : p[v] * dloss;
    d[v] = g;
  }
}

struct CeDims {
  std::int64_t rows;
  int padded_vocab;
};

CeDims check_dims(const TensorView& probs, const TensorView& targets, int vocab_size) {
  detail::check_on_gpu(probs, "probs/logits");
  detail::check_on_gpu(targets, "targets");
  ZT_CHECK(probs.dtype == DType::kF32, "cross-entropy is fp32 only");
  ZT_CHECK(targets.dtype == DType::kI32, "targets must be I32");
  ZT_CHECK(probs.shape.ndim() >= 1);
  const std::int64_t Vp = probs.shape[probs.shape.ndim() - 1];
  ZT_CHECK(vocab_size > 0 && vocab_size <= Vp && Vp < (std::int64_t{1} << 31), "vocab_size {} outside (0, {}]",
           vocab_size, Vp);
  CeDims d{probs.numel() / Vp, static_cast<int>(Vp)};
  ZT_CHECK(targets.numel() == d.rows, "targets has {} elements, logits {} rows", targets.numel(), d.rows);
  ZT_CHECK(d.rows < (std::int64_t{1} << 31), "too many rows for one grid dimension");
  return d;
}

template <Output kOut>
void launch(const ExecContext& ctx, TensorView losses, TensorView out, TensorView logits, TensorView targets,
            float dloss, int vocab_size) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const CeDims d = check_dims(out, targets, vocab_size);
  detail::check_on_gpu(logits, "logits");
  detail::check_on_gpu(losses, "losses");
  ZT_CHECK(logits.dtype == DType::kF32 && logits.numel() == out.numel(), "logits must be F32 shaped as probs");
  ZT_CHECK(losses.dtype == DType::kF32 && losses.numel() == d.rows, "losses must be F32 [{}]", d.rows);
  if (d.rows == 0) return;
  softmax_ce_kernel<kOut><<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(
      losses.as<float>(), out.as<float>(), logits.as<float>(), targets.as<std::int32_t>(), d.padded_vocab,
      vocab_size, dloss);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  launch<Output::kProbs>(ctx, losses, probs, logits, targets, 0.0f, vocab_size);
}

void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size) {
  launch<Output::kGradient>(ctx, losses, dlogits, logits, targets, dloss, vocab_size);
}

void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const CeDims d = check_dims(probs, targets, vocab_size);
  detail::check_on_gpu(dlogits, "dlogits");
  ZT_CHECK(dlogits.dtype == DType::kF32 && dlogits.numel() == probs.numel(), "dlogits must be F32 shaped as probs");
  if (d.rows == 0) return;
  softmax_ce_backward_kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(
      dlogits.as<float>(), probs.as<float>(), targets.as<std::int32_t>(), d.padded_vocab, vocab_size, dloss);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
