// Softmax + cross-entropy on the GPU: operand checks and launches of the kernels in
// cross_entropy_kernels.cuh (whose header says how they work), the row kept in shared memory
// where it fits.
#include "kernels/cuda/cross_entropy.h"

#include <algorithm>

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

// The most dynamic shared memory a kRowInSmem block takes ([Note: the row in shared memory] in
// cross_entropy_kernels.cuh): half an SM's, less each block's static shared memory (the block
// reductions' 32 floats and 32 doubles) and the runtime's reservation, so two blocks of 1024
// threads share an SM; and no more than the device grants a block. 0 where there is no device.
std::size_t row_cache_limit() {
  static const std::size_t limit = [] {
    int device = 0, per_sm = 0, optin = 0, reserved = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) != cudaSuccess) {
      (void)cudaGetLastError();  // no device: nothing will launch, and the error must not linger
      return std::size_t{0};
    }
    constexpr int kStatic = 32 * static_cast<int>(sizeof(float) + sizeof(double));
    const int half = per_sm / 2 - reserved - kStatic;
    return static_cast<std::size_t>(std::max(0, std::min(half, optin)));
  }();
  return limit;
}

// One block a row: the row read from memory each pass, or kept in shared memory where it fits and
// kSharedMemory asks (the same bits either way).
template <Output kOut, typename T, int kVec>
void launch_rows(cudaStream_t stream, const CeDims& d, int vocab_size, float* losses, T* o, const T* x,
                 const std::int32_t* targets, float dloss, CeRowCache cache) {
  const unsigned grid = static_cast<unsigned>(d.rows);
  const std::size_t bytes = detail::ce::row_cache_bytes<T, kVec>(vocab_size);
  if (cache == CeRowCache::kSharedMemory && bytes <= row_cache_limit()) {
    constexpr auto kKernel = softmax_ce_kernel<kOut, T, kVec, true>;
    // Above the 48 KiB default the dynamic shared memory is opted into, once per kernel (the
    // process drives one GPU), with the carveout preferring shared memory so two blocks fit.
    static const bool configured = [] {
      ZT_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(row_cache_limit())));
      ZT_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared));
      return true;
    }();
    (void)configured;
    kKernel<<<grid, kThreads, bytes, stream>>>(losses, o, x, targets, d.padded_vocab, vocab_size, dloss);
  } else {
    softmax_ce_kernel<kOut, T, kVec, false>
        <<<grid, kThreads, 0, stream>>>(losses, o, x, targets, d.padded_vocab, vocab_size, dloss);
  }
}

template <Output kOut>
void launch(const char* op, const ExecContext& ctx, TensorView losses, TensorView out, TensorView logits,
            TensorView targets, float dloss, int vocab_size, CeRowCache cache = CeRowCache::kReread) {
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
    if (use_wide(d.padded_vocab, o, x)) {
      launch_rows<kOut, T, detail::kWideVec<T>>(stream, d, vocab_size, losses.as<float>(), o, x,
                                                targets.as<std::int32_t>(), dloss, cache);
    } else {
      launch_rows<kOut, T, 1>(stream, d, vocab_size, losses.as<float>(), o, x, targets.as<std::int32_t>(), dloss,
                              cache);
    }
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_cross_entropy_forward(const ExecContext& ctx, TensorView losses, TensorView probs, TensorView logits,
                                   TensorView targets, int vocab_size) {
  launch<Output::kProbs>("softmax_cross_entropy_forward", ctx, losses, probs, logits, targets, 0.0f, vocab_size);
}

void softmax_cross_entropy_fused(const ExecContext& ctx, TensorView losses, TensorView dlogits, TensorView logits,
                                 TensorView targets, float dloss, int vocab_size, CeRowCache cache) {
  launch<Output::kGradient>("softmax_cross_entropy_fused", ctx, losses, dlogits, logits, targets, dloss, vocab_size,
                            cache);
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
