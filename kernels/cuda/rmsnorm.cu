// RMSNorm on the GPU: operand checks and launches of the kernels in rmsnorm_kernels.cuh.
#include "kernels/cuda/rmsnorm.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_rows_choice.h"
#include "kernels/cuda/rmsnorm_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::rms::kBackwardThreads;
using detail::rms::kForwardWarps;
using detail::rms::kRowsPerChunk;

struct RowDims {
  std::int64_t rows;
  int cols;
};

RowDims check_views(const char* op, DType act, const TensorView& out_like, const TensorView& rstd,
                    const TensorView& inp, const TensorView& weight) {
  for (const TensorView* v : {&out_like, &rstd, &inp, &weight}) detail::check_on_gpu(*v, "rmsnorm operand");
  ZT_CHECK(rstd.dtype == DType::kF32, "rmsnorm: rstd is F32, not {}", dtype_name(rstd.dtype));
  detail::check_param_dtype(op, act, {weight});
  ZT_CHECK(inp.shape.ndim() >= 1);
  const std::int64_t C = inp.shape[inp.shape.ndim() - 1];
  ZT_CHECK(C > 0 && C <= (1 << 30));
  RowDims d{inp.numel() / C, static_cast<int>(C)};
  ZT_CHECK(out_like.numel() == inp.numel(), "out/dout has {} elements, inp {}", out_like.numel(), inp.numel());
  ZT_CHECK(rstd.numel() == d.rows, "rstd must have {} elements", d.rows);
  ZT_CHECK(weight.numel() == C, "weight must have {} elements", C);
  return d;
}

}  // namespace

void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("rmsnorm_forward", {out, inp});
  const RowDims d = check_views("rmsnorm_forward", dtype, out, rstd, inp, weight);
  ZT_CHECK(eps > 0.0f, "rmsnorm eps {} must be positive", eps);
  if (d.rows == 0) return;
  detail::dispatch_activation_params(dtype, weight.dtype, [&](auto type, auto ptype) {
    using T = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    T* o = detail::act_data<T>(out);
    const T* x = detail::act_data<T>(inp);
    const P* w = detail::act_data<P>(weight);
    constexpr int kWide = detail::kWideVec<T>;
    const bool vec = d.cols % kWide == 0 && detail::wide_vec_aligned(o) && detail::wide_vec_aligned(x) &&
                     detail::wide_vec_aligned(w);
    const bool whole_row = vec && d.cols / kWide <= std::int64_t{detail::rms::kWholeRowGroups} * detail::kWarpSize;
    const auto kernel = whole_row ? detail::rms::rmsnorm_forward_kernel<T, P, kWide, true>
                        : vec     ? detail::rms::rmsnorm_forward_kernel<T, P, kWide>
                                  : detail::rms::rmsnorm_forward_kernel<T, P, 1>;
    kernel<<<static_cast<unsigned>((d.rows + kForwardWarps - 1) / kForwardWarps), kForwardWarps * detail::kWarpSize, 0,
             stream>>>(o, rstd.as<float>(), x, w, d.rows, d.cols, eps);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd, NormBackwardRows rows) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("rmsnorm_backward", {dinp, dout, inp});
  const RowDims d = check_views("rmsnorm_backward", dtype, dout, rstd, inp, weight);
  for (const TensorView* v : {&dinp, &dweight}) detail::check_on_gpu(*v, "rmsnorm gradient");
  ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped as inp");
  ZT_CHECK(dweight.dtype == DType::kF32 || dweight.dtype == dtype, "dweight must be F32 or {}", dtype_name(dtype));
  ZT_CHECK(dweight.numel() == d.cols, "dweight must have {} elements", d.cols);
  const std::int64_t num_chunks = kernel_scratch::chunks_of(d.rows, kRowsPerChunk);
  if (num_chunks == 0) return;
  Buffer partials =
      detail::resources_of(ctx).scratch(DType::kF32, kernel_scratch::rmsnorm_backward_partial_floats(d.rows, d.cols));
  detail::dispatch_activation_params(dtype, weight.dtype, [&](auto type, auto ptype) {
    using T = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    T* di = detail::act_data<T>(dinp);
    const T* g = detail::act_data<T>(dout);
    const T* x = detail::act_data<T>(inp);
    const P* w = detail::act_data<P>(weight);
    constexpr int kWide = detail::kWideVec<T>;
    const bool vec = d.cols % kWide == 0 && detail::wide_vec_aligned(di) && detail::wide_vec_aligned(g) &&
                     detail::wide_vec_aligned(x) && detail::aligned16(partials.data()) && detail::wide_vec_aligned(w);
    const std::int64_t groups = d.cols / kWide;
    auto launch = [&](NormBackwardRows which, void* dinp_void, float* partials_at, std::int64_t n) {
      T* dinp_at = static_cast<T*>(dinp_void);
      const auto grid = static_cast<unsigned>((n + kRowsPerChunk - 1) / kRowsPerChunk);
      if (which == NormBackwardRows::kBlock) {
        // [Note: a block a row] in block_row_backward.cuh.
        const auto kernel =
            detail::block_rows_kernel<detail::rms::RmsNormRows<kWide>, T, P, kWide, kRowsPerChunk>(groups);
        const float* no_mean = nullptr;
        kernel<<<grid, detail::block_row_threads(groups), 0, stream>>>(dinp_at, partials_at, g, x, w, no_mean,
                                                                       rstd.as<float>(), n, d.cols);
      } else {
        // A warp a row: the row kept from its first pass where it fits a warp's batch of loads.
        const bool whole_row = vec && groups <= std::int64_t{detail::kRowBatch} * detail::kWarpSize;
        const auto kernel = whole_row ? detail::rms::rmsnorm_backward_chunk<T, P, kWide, true>
                            : vec     ? detail::rms::rmsnorm_backward_chunk<T, P, kWide>
                                      : detail::rms::rmsnorm_backward_chunk<T, P, 1>;
        kernel<<<grid, kBackwardThreads, 0, stream>>>(dinp_at, partials_at, g, x, w, rstd.as<float>(), n, d.cols);
      }
      ZT_CUDA_CHECK_LAUNCH();
    };
    const detail::NormRowsShape shape{1, dtype, weight.dtype, d.rows, d.cols, kRowsPerChunk, std::int64_t{d.cols}};
    detail::launch_norm_backward_rows(ctx, rows, vec && groups <= detail::kBlockRowMaxGroups, shape, launch, di,
                                      partials.as<float>());
  });
  detail::dispatch_activation(dweight.dtype, [&](auto type) {
    using D = typename decltype(type)::type;
    detail::rms::rmsnorm_backward_params<D><<<detail::partial_blocks(d.cols), detail::kPartialThreads, 0, stream>>>(
        detail::act_data<D>(dweight), partials.as<float>(), num_chunks, d.cols);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
