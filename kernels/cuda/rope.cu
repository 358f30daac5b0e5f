// RoPE on the GPU: operand checks and the launch of rope_kernels.cuh's kernel.
#include "kernels/cuda/rope.h"

#include "kernels/contracts/operand_checks.h"  // rope_dims
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope_kernels.cuh"

namespace zt::cuda {

namespace {

void rotate(const ExecContext& ctx, const char* op, TensorView x, int n_heads, int head_size,
            const RopeFrequencies& freq, float sign, std::int64_t first) {
  detail::check_on_gpu(x, "rope operand");
  const DType dtype = detail::activation_dtype(op, {x});
  const RopeDims d = rope_dims(x, n_heads, head_size, freq);  // the checks both backends share
  ZT_CHECK(first + d.T < (std::int64_t{1} << 31) && d.W < (std::int64_t{1} << 31), "rope: sizes exceed int32");
  const std::int64_t rows = d.B * d.T, items = rows * (head_size / 2);  // a thread's heads: n_heads
  if (items == 0 || n_heads == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    detail::rope::rope_kernel<T>
        <<<detail::grid_for(items, detail::rope::kThreads), detail::rope::kThreads, 0, stream>>>(
            detail::act_data<T>(x), rows, static_cast<int>(d.T), static_cast<int>(d.W), n_heads, head_size, freq,
            detail::rope::frequency_table(head_size, freq), sign, static_cast<int>(first));
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position) {
  rotate(ctx, "rope_forward", x, n_heads, head_size, freq, 1.0f, first_position);
}

void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq) {
  rotate(ctx, "rope_backward", dx, n_heads, head_size, freq, -1.0f, 0);
}

}  // namespace zt::cuda
