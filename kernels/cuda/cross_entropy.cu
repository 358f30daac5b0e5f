// Softmax + cross-entropy on the GPU: operand checks and launches of the kernels in
// cross_entropy_kernels.cuh (whose header says how they work).
#include "kernels/cuda/cross_entropy.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cross_entropy_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::ce::kThreads;
using detail::ce::Output;
using detail::ce::softmax_ce_backward_kernel;
using detail::ce::softmax_ce_kernel;

// 16-byte groups (kWideVec<T> columns) need whole groups per row and row starts aligned16.
template <typename T>
bool use_wide(int Vp, const T* a, const T* b) {
  return Vp % detail::kWideVec<T> == 0 && detail::wide_vec_aligned(a) && detail::wide_vec_aligned(b);
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
    const auto kernel = use_wide(d.padded_vocab, o, x) ? softmax_ce_kernel<kOut, T, detail::kWideVec<T>>
                                                       : softmax_ce_kernel<kOut, T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(losses.as<float>(), o, x, targets.as<std::int32_t>(),
                                                                   d.padded_vocab, vocab_size, dloss);
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
    const auto kernel = use_wide(d.padded_vocab, dl, p) ? softmax_ce_backward_kernel<T, detail::kWideVec<T>>
                                                        : softmax_ce_backward_kernel<T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(dl, p, targets.as<std::int32_t>(), d.padded_vocab,
                                                                   vocab_size, dloss);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
