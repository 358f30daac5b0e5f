// RoPE on the GPU: operand checks and the launch of rope_kernels.cuh's kernel.
#include "kernels/cuda/rope.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope_kernels.cuh"

namespace zt::cuda {

namespace {

void rotate(const ExecContext& ctx, const char* op, TensorView x, int n_heads, int head_size, float theta, float sign) {
  detail::check_on_gpu(x, "rope operand");
  const DType dtype = detail::activation_dtype(op, {x});
  ZT_CHECK(x.shape.ndim() == 3, "rope: x must be [B, T, W]");
  ZT_CHECK(head_size > 0 && head_size % 2 == 0, "rope: head_size {} must be even", head_size);
  ZT_CHECK(n_heads >= 0 && static_cast<std::int64_t>(n_heads) * head_size <= x.shape[2],
           "rope: {} heads of {} exceed the row's {} columns", n_heads, head_size, x.shape[2]);
  ZT_CHECK(theta > 0.0f, "rope: theta {} must be positive", theta);
  ZT_CHECK(x.shape[1] < (std::int64_t{1} << 31) && x.shape[2] < (std::int64_t{1} << 31), "rope: sizes exceed int32");
  const std::int64_t rows = x.shape[0] * x.shape[1], pairs = rows * n_heads * (head_size / 2);
  if (pairs == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    detail::rope::rope_kernel<T>
        <<<detail::grid_for(pairs, detail::rope::kThreads), detail::rope::kThreads, 0, stream>>>(
            detail::act_data<T>(x), rows, static_cast<int>(x.shape[1]), static_cast<int>(x.shape[2]), n_heads,
            head_size, theta, sign);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, float theta) {
  rotate(ctx, "rope_forward", x, n_heads, head_size, theta, 1.0f);
}

void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, float theta) {
  rotate(ctx, "rope_backward", dx, n_heads, head_size, theta, -1.0f);
}

}  // namespace zt::cuda
