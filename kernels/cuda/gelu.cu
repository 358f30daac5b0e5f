// GELU on the GPU: launches of the kernels in gelu_kernels.cuh (whose header says how they work).
#include "kernels/cuda/gelu.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::gelu::gelu_backward_kernel;
using detail::gelu::gelu_forward_kernel;
using detail::gelu::kThreads;

}  // namespace

void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(out, "out");
  detail::check_on_gpu(inp, "inp");
  const DType dtype = detail::activation_dtype("gelu_forward", {out, inp});
  ZT_CHECK(out.numel() == inp.numel(), "out has {} elements, inp {}", out.numel(), inp.numel());
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* o = detail::act_data<T>(out);
    const T* x = detail::act_data<T>(inp);
    constexpr int kWide = detail::kWideVec<T>;
    if (detail::wide_vec_aligned(o) && detail::wide_vec_aligned(x)) {
      gelu_forward_kernel<T, kWide>
          <<<detail::grid_for((n + kWide - 1) / kWide, kThreads), kThreads, 0, stream>>>(o, x, n);
    } else {
      gelu_forward_kernel<T, 1><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(o, x, n);
    }
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(dinp, "dinp");
  detail::check_on_gpu(inp, "inp");
  detail::check_on_gpu(dout, "dout");
  const DType dtype = detail::activation_dtype("gelu_backward", {dinp, inp, dout});
  ZT_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: element counts differ");
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* di = detail::act_data<T>(dinp);
    const T* x = detail::act_data<T>(inp);
    const T* g = detail::act_data<T>(dout);
    constexpr int kWide = detail::kWideVec<T>;
    if (detail::wide_vec_aligned(di) && detail::wide_vec_aligned(x) && detail::wide_vec_aligned(g)) {
      gelu_backward_kernel<T, kWide>
          <<<detail::grid_for((n + kWide - 1) / kWide, kThreads), kThreads, 0, stream>>>(di, x, g, n);
    } else {
      gelu_backward_kernel<T, 1><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(di, x, g, n);
    }
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
