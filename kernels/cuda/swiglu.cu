// SwiGLU on the GPU: operand checks and launches of the kernels in swiglu_kernels.cuh.
#include "kernels/cuda/swiglu.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/swiglu_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::swiglu::kThreads;

struct Dims {
  std::int64_t rows;
  int hidden;
};

Dims check(const TensorView& out_like, const TensorView& gate_up) {
  ZT_CHECK(gate_up.shape.ndim() >= 1);
  const std::int64_t two_h = gate_up.shape[gate_up.shape.ndim() - 1];
  ZT_CHECK(two_h > 0 && two_h % 2 == 0 && two_h < (std::int64_t{1} << 31), "gate_up's last dimension {} is not 2 H",
           two_h);
  Dims d{gate_up.numel() / two_h, static_cast<int>(two_h / 2)};
  ZT_CHECK(out_like.numel() == d.rows * d.hidden, "out/dout has {} elements, gate_up {} rows of {}", out_like.numel(),
           d.rows, d.hidden);
  return d;
}

}  // namespace

void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(out, "out");
  detail::check_on_gpu(gate_up, "gate_up");
  const DType dtype = detail::activation_dtype("swiglu_forward", {out, gate_up});
  const Dims d = check(out, gate_up);
  if (d.rows == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* o = detail::act_data<T>(out);
    const T* gu = detail::act_data<T>(gate_up);
    constexpr int kWide = detail::kWideVec<T>;
    const bool vec = d.hidden % kWide == 0 && detail::wide_vec_aligned(o) && detail::wide_vec_aligned(gu);
    const std::int64_t groups = d.rows * (d.hidden / (vec ? kWide : 1));
    const auto kernel =
        vec ? detail::swiglu::swiglu_forward_kernel<T, kWide> : detail::swiglu::swiglu_forward_kernel<T, 1>;
    kernel<<<detail::grid_for(groups, kThreads), kThreads, 0, stream>>>(o, gu, d.rows, d.hidden);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout) {
  const cudaStream_t stream = detail::stream_of(ctx);
  for (const TensorView* v : {&dgate_up, &gate_up, &dout}) detail::check_on_gpu(*v, "swiglu operand");
  const DType dtype = detail::activation_dtype("swiglu_backward", {dgate_up, gate_up, dout});
  const Dims d = check(dout, gate_up);
  ZT_CHECK(dgate_up.numel() == gate_up.numel(), "dgate_up must be shaped as gate_up");
  if (d.rows == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* dgu = detail::act_data<T>(dgate_up);
    const T* gu = detail::act_data<T>(gate_up);
    const T* g = detail::act_data<T>(dout);
    constexpr int kWide = detail::kWideVec<T>;
    const bool vec = d.hidden % kWide == 0 && detail::wide_vec_aligned(dgu) && detail::wide_vec_aligned(gu) &&
                     detail::wide_vec_aligned(g);
    const std::int64_t groups = d.rows * (d.hidden / (vec ? kWide : 1));
    const auto kernel =
        vec ? detail::swiglu::swiglu_backward_kernel<T, kWide> : detail::swiglu::swiglu_backward_kernel<T, 1>;
    kernel<<<detail::grid_for(groups, kThreads), kThreads, 0, stream>>>(dgu, gu, g, d.rows, d.hidden);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
