// Chunked softmax + cross-entropy on the GPU: operand checks and launches of the kernels in
// chunked_cross_entropy_kernels.cuh.
#include "kernels/cuda/chunked_cross_entropy.h"

#include <algorithm>

#include "kernels/cuda/chunked_cross_entropy_kernels.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

using detail::chunked_ce::kThreads;

struct ChunkDims {
  std::int64_t rows;
  int cols, live;
};

ChunkDims check_chunk(const TensorView& logits, const TensorView& targets, std::int64_t begin, int vocab_size) {
  detail::check_on_gpu(logits, "logits");
  detail::check_on_gpu(targets, "targets");
  ZT_CHECK(targets.dtype == DType::kI32, "targets must be I32");
  ZT_CHECK(logits.shape.ndim() >= 1 && begin >= 0 && vocab_size > 0);
  const std::int64_t cols = logits.shape[logits.shape.ndim() - 1];
  ZT_CHECK(cols < (std::int64_t{1} << 31), "a chunk of {} columns", cols);
  ChunkDims d{cols == 0 ? 0 : logits.numel() / cols, static_cast<int>(cols),
              static_cast<int>(std::clamp<std::int64_t>(vocab_size - begin, 0, cols))};
  ZT_CHECK(targets.numel() == d.rows, "targets has {} elements, logits {} rows", targets.numel(), d.rows);
  ZT_CHECK(d.rows < (std::int64_t{1} << 31), "too many rows for one grid dimension");
  return d;
}

void check_stat(const TensorView& v, std::int64_t rows, const char* name) {
  detail::check_on_gpu(v, name);
  ZT_CHECK(v.dtype == DType::kF32 && v.numel() == rows, "{} must be F32 [{}]", name, rows);
}

template <typename T>
bool use_wide(int cols, const T* a, const T* b) {
  return cols % detail::kWideVec<T> == 0 && detail::wide_vec_aligned(a) && detail::wide_vec_aligned(b);
}

}  // namespace

void cross_entropy_chunk_stats(const ExecContext& ctx, TensorView row_max, TensorView row_sum, TensorView target_logit,
                               TensorView logits, TensorView targets, std::int64_t begin, int vocab_size, bool first) {
  const DType dtype = detail::activation_dtype("cross_entropy_chunk_stats", {logits});
  const ChunkDims d = check_chunk(logits, targets, begin, vocab_size);
  check_stat(row_max, d.rows, "row_max");
  check_stat(row_sum, d.rows, "row_sum");
  check_stat(target_logit, d.rows, "target_logit");
  if (d.rows == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    const T* x = detail::act_data<T>(logits);
    const auto kernel = use_wide(d.cols, x, x) ? detail::chunked_ce::chunk_stats_kernel<T, detail::kWideVec<T>>
                                               : detail::chunked_ce::chunk_stats_kernel<T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(
        row_max.as<float>(), row_sum.as<float>(), target_logit.as<float>(), x, targets.as<std::int32_t>(), d.cols,
        d.live, begin, vocab_size, first);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void cross_entropy_chunk_loss(const ExecContext& ctx, TensorView losses, TensorView lse, TensorView row_max,
                              TensorView row_sum, TensorView target_logit) {
  const std::int64_t rows = row_max.numel();
  check_stat(losses, rows, "losses");
  check_stat(lse, rows, "lse");
  check_stat(row_max, rows, "row_max");
  check_stat(row_sum, rows, "row_sum");
  check_stat(target_logit, rows, "target_logit");
  if (rows == 0) return;
  constexpr int kBlock = 256;
  detail::chunked_ce::
      chunk_loss_kernel<<<static_cast<unsigned>((rows + kBlock - 1) / kBlock), kBlock, 0, detail::stream_of(ctx)>>>(
          losses.as<float>(), lse.as<float>(), row_max.as<float>(), row_sum.as<float>(), target_logit.as<float>(),
          rows);
  ZT_CUDA_CHECK_LAUNCH();
}

void cross_entropy_chunk_backward(const ExecContext& ctx, TensorView dlogits, TensorView logits, TensorView lse,
                                  TensorView targets, std::int64_t begin, float dloss, int vocab_size) {
  const DType dtype = detail::activation_dtype("cross_entropy_chunk_backward", {dlogits, logits});
  const ChunkDims d = check_chunk(logits, targets, begin, vocab_size);
  detail::check_on_gpu(dlogits, "dlogits");
  check_stat(lse, d.rows, "lse");
  ZT_CHECK(dlogits.numel() == logits.numel(), "dlogits must be shaped as logits");
  if (d.rows == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* dl = detail::act_data<T>(dlogits);
    const T* x = detail::act_data<T>(logits);
    const auto kernel = use_wide(d.cols, dl, x) ? detail::chunked_ce::chunk_backward_kernel<T, detail::kWideVec<T>>
                                                : detail::chunked_ce::chunk_backward_kernel<T, 1>;
    kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(dl, x, lse.as<float>(), targets.as<std::int32_t>(),
                                                                   d.cols, d.live, begin, dloss);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
