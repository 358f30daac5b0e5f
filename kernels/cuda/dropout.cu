// Dropout on the GPU: operand checks and launches of the kernel in dropout_kernels.cuh (whose
// header says how it works).
#include "kernels/cuda/dropout.h"

#include "kernels/contracts/dropout_spec.h"  // check_operands: shared with the CPU
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout_kernels.cuh"
#include "kernels/cuda/dropout_mask.cuh"

namespace zt::cuda {

namespace {

using detail::dropout::apply_mask;
using detail::dropout::kThreads;

template <typename T>
void launch(cudaStream_t stream, T* o, const T* x, std::int64_t B, std::int64_t N, const DropoutSpec& spec) {
  const detail::MaskParams m = detail::mask_params(spec);
  constexpr int kWide = detail::kWideVec<T>;
  // out may alias in: each thread reads its elements before writing them, and no other thread
  // touches them.
  if (N % kWide == 0 && detail::wide_vec_aligned(o) && detail::wide_vec_aligned(x)) {
    constexpr int kPer = detail::dropout::kElementsPerThread<kWide>;
    const unsigned grid = detail::grid_for(B * ((N + kPer - 1) / kPer), kThreads);
    apply_mask<T, kWide><<<grid, kThreads, 0, stream>>>(o, x, B, N, m);
  } else {
    constexpr int kPer = detail::dropout::kElementsPerThread<1>;
    const unsigned grid = detail::grid_for(B * ((N + kPer - 1) / kPer), kThreads);
    apply_mask<T, 1><<<grid, kThreads, 0, stream>>>(o, x, B, N, m);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

void run(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec, const char* what) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(out, what);
  detail::check_on_gpu(in, what);
  const DType dtype = detail::activation_dtype(what, {out, in});
  const dropout_rules::MaskRows rows = dropout_rules::check_operands(out, in, spec, what);
  const std::int64_t B = rows.samples, N = rows.per_sample;  // N: elements per sample
  if (in.numel() == 0) return;
  if (!spec.active()) {  // exactly the identity, no random numbers drawn
    if (out.data != in.data) {
      ZT_CUDA_CHECK(cudaMemcpyAsync(out.data, in.data, in.size_bytes(), cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    launch(stream, detail::act_data<T>(out), detail::act_data<T>(in), B, N, spec);
  });
}

}  // namespace

void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) {
  run(ctx, out, in, spec, "dropout_forward");
}

void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec) {
  run(ctx, dinp, dout, spec, "dropout_backward");
}

}  // namespace zt::cuda
