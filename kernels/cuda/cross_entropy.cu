// Softmax + cross-entropy on the GPU, one block per row: max (block reduction), sum of
// exp(x - max) in fp64 (fixed-order block reduction, as the CPU keeps its sum in fp64), then one
// write pass. The row (200 KB at V = 50257) is read three times but stays in L2 between passes,
// so DRAM sees about one read and one write of the logits. Rows move in groups of 4 columns, one
// vector access each (padded columns loaded but masked), where Vp % 4 == 0 and logits and output are
// aligned to the group's width, else one element at a time; the fp64 sum's order is fixed for
// either, so results repeat bitwise. logits/probs/dlogits are F32 or BF16 (docs/precision.md:
// bf16 widened on load, each output rounded once); losses are F32.
#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 1024;

enum class Output { kProbs, kGradient };

// Writes probs (kProbs) or (probs - onehot) * dloss (kGradient) into out; losses[row] in both.
// Each thread owns the groups q = threadIdx.x, threadIdx.x + kThreads, ... of kVec columns of the
// padded row (Vp % kVec == 0); columns v >= V in a group are loaded but never enter max or sum.
// T is the activation storage type of out and logits: widened on load, each output rounded once.
template <Output kOut, typename T, int kVec>
__global__ void softmax_ce_kernel(float* losses, T* out, const T* logits, const std::int32_t* targets, int Vp, int V,
                                  float dloss) {
  using Vec = detail::ActVec<T, kVec>;
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const std::int64_t row = blockIdx.x;
  const T* x = logits + row * Vp;
  T* o = out + row * Vp;  // may be x: each group is read before the same thread writes it
  const std::int32_t target = targets[row];
  const bool target_ok = target >= 0 && target < V;
  const float target_logit = target_ok ? detail::load_act(x + target) : NAN;  // read before any write to the row
  const int live_groups = (V + kVec - 1) / kVec;  // the groups holding columns < V
  float mx = -INFINITY;
  for (int q = threadIdx.x; q < live_groups; q += kThreads) {
    const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (q * kVec + i < V) mx = fmaxf(mx, xv[i]);
    }
  }
  mx = detail::block_max(mx, shared_f);
  double sum = 0.0;
  for (int q = threadIdx.x; q < live_groups; q += kThreads) {
    const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (q * kVec + i < V) sum += static_cast<double>(expf(xv[i] - mx));
    }
  }
  sum = detail::block_sum(sum, shared_d);
  // All threads have read target_logit and finished their reads of x in the passes above; the
  // block_sum barrier orders them before the writes below.
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int q = threadIdx.x; q < Vp / kVec; q += kThreads) {
    Vec p{};  // padded columns stay 0
    if (q < live_groups) {
      const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const int v = q * kVec + i;
        if (v < V) {
          p[i] = expf(xv[i] - mx) * inv_sum;
          if (kOut == Output::kGradient) p[i] = (p[i] - (v == target ? 1.0f : 0.0f)) * dloss;
        }
      }
    }
    p.store(o + q * kVec);
  }
  if (threadIdx.x == 0) {
    losses[row] = static_cast<float>(log(sum) - (static_cast<double>(target_logit) - static_cast<double>(mx)));
  }
}

// Groups of kVec columns and storage type T as in softmax_ce_kernel.
template <typename T, int kVec>
__global__ void softmax_ce_backward_kernel(T* dlogits, const T* probs, const std::int32_t* targets, int Vp, int V,
                                           float dloss) {
  using Vec = detail::ActVec<T, kVec>;
  __shared__ float target_prob;
  const std::int64_t row = blockIdx.x;
  const T* p = probs + row * Vp;
  T* d = dlogits + row * Vp;  // may alias p: the target's probability is read first
  const std::int32_t target = targets[row];
  if (threadIdx.x == 0) target_prob = (target >= 0 && target < V) ? detail::load_act(p + target) : NAN;
  __syncthreads();
  const int live_groups = (V + kVec - 1) / kVec;
  for (int q = threadIdx.x; q < Vp / kVec; q += kThreads) {
    Vec g{};  // padded columns stay 0
    if (q < live_groups) {
      const Vec pv = Vec::load(p + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const int v = q * kVec + i;
        if (v < V) g[i] = v == target ? (target_prob - 1.0f) * dloss : pv[i] * dloss;
      }
    }
    g.store(d + q * kVec);
  }
}

// Groups of 4 need whole groups per row (Vp % 4 == 0) and row starts aligned to the groups' width.
template <typename T>
bool use_vec4(int Vp, const T* a, const T* b) {
  return Vp % 4 == 0 && detail::act_vec4_aligned(a) && detail::act_vec4_aligned(b);
}

struct CeDims {
  std::int64_t rows;
  int padded_vocab;
};

// Shapes only: the callers check the activation dtypes (activation_dtype).
CeDims check_dims(const TensorView& probs, const TensorView& targets, int vocab_size) {
  detail::check_on_gpu(probs, "probs/logits");
  detail::check_on_gpu(targets, "targets");
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
void launch(const char* op, const ExecContext& ctx, TensorView losses, TensorView out, TensorView logits,
            TensorView targets, float dloss, int vocab_size) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype(op, {out, logits});
  const CeDims d = check_dims(out, targets, vocab_size);
  detail::check_on_gpu(logits, "logits");
  detail::check_on_gpu(losses, "losses");
  ZT_CHECK(logits.numel() == out.numel(), "{}: logits must be shaped as the output", op);
  ZT_CHECK(losses.dtype == DType::kF32 && losses.numel() == d.rows, "losses must be F32 [{}]", d.rows);
  if (d.rows == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* o = detail::act_data<T>(out);
    const T* x = detail::act_data<T>(logits);
    const auto kernel = use_vec4(d.padded_vocab, o, x) ? softmax_ce_kernel<kOut, T, 4> : softmax_ce_kernel<kOut, T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(losses.as<float>(), o, x,
                                                                   targets.as<std::int32_t>(), d.padded_vocab,
                                                                   vocab_size, dloss);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  launch<Output::kProbs>("softmax_cross_entropy_forward", ctx, losses, probs, logits, targets, 0.0f, vocab_size);
}

void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size) {
  launch<Output::kGradient>("softmax_cross_entropy_fused", ctx, losses, dlogits, logits, targets, dloss, vocab_size);
}

void softmax_cross_entropy_backward(const ExecContext& ctx, TensorView dlogits, TensorView probs, TensorView targets,
                                    float dloss, int vocab_size) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("softmax_cross_entropy_backward", {dlogits, probs});
  const CeDims d = check_dims(probs, targets, vocab_size);
  detail::check_on_gpu(dlogits, "dlogits");
  ZT_CHECK(dlogits.numel() == probs.numel(), "dlogits must be shaped as probs");
  if (d.rows == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* dl = detail::act_data<T>(dlogits);
    const T* p = detail::act_data<T>(probs);
    const auto kernel = use_vec4(d.padded_vocab, dl, p) ? softmax_ce_backward_kernel<T, 4>
                                                        : softmax_ce_backward_kernel<T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(dl, p, targets.as<std::int32_t>(), d.padded_vocab,
                                                                   vocab_size, dloss);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
