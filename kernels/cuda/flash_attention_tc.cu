// Launchers of the tensor-core flash attention kernels (flash_attention_tc_kernels.cuh, where
// [Note: flash attention on tensor cores] explains them): one instantiation per head size, the
// dynamic shared memory each needs opted into before its launch.
#include "kernels/cuda/flash_attention_tc.cuh"

#include <type_traits>

#include "kernels/cuda/flash_attention_tc_kernels.cuh"

namespace zt::cuda::detail {

namespace {

using namespace tc_flash;  // NOLINT: the kernels and their constants, this file's whole subject

// Launches kernel on a (row blocks, B * NH) grid with `bytes` of dynamic shared memory (above the
// 48 KiB default, so opted into per kernel).
template <typename Kernel, typename... Args>
void launch(Kernel kernel, std::size_t bytes, cudaStream_t stream, int B, const FlashGeometry& g, Args... args) {
  ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>((g.T + kRows - 1) / kRows), static_cast<unsigned>(B * g.NH));
  kernel<<<grid, kThreads, bytes, stream>>>(args...);
  ZT_CUDA_CHECK_LAUNCH();
}

template <typename Fn>
void with_tc_head_size(int hs, Fn&& fn) {
  switch (hs) {
    case 16: fn(std::integral_constant<int, 16>{}); break;
    case 32: fn(std::integral_constant<int, 32>{}); break;
    case 64: fn(std::integral_constant<int, 64>{}); break;
    case 128: fn(std::integral_constant<int, 128>{}); break;
    default: ZT_CHECK(false, "the tensor-core flash kernels have no head size {}", hs);
  }
}

}  // namespace

bool tc_flash_supports(int hs) { return hs == 16 || hs == 32 || hs == 64 || hs == 128; }

void tc_flash_forward(cudaStream_t stream, bf16* out, float* lse, const bf16* qkv, int B, int hs,
                      const FlashGeometry& g, const MaskParams& mask) {
  with_tc_head_size(hs, [&](auto size) {
    constexpr int HS = decltype(size)::value;
    launch(tc_forward_kernel<HS>, forward_smem<HS>().bytes, stream, B, g, out, lse, qkv, g, mask);
  });
}

void tc_flash_backward(cudaStream_t stream, bf16* dqkv, const bf16* qkv, const bf16* dout, const float* lse,
                       const float* delta, int B, int hs, const FlashGeometry& g, const MaskParams& mask) {
  with_tc_head_size(hs, [&](auto size) {
    constexpr int HS = decltype(size)::value;
    constexpr std::size_t bytes = backward_smem<HS>().bytes;
    launch(tc_dq_kernel<HS>, bytes, stream, B, g, dqkv, qkv, dout, lse, delta, g, mask);
    launch(tc_dkv_kernel<HS>, bytes, stream, B, g, dqkv, qkv, dout, lse, delta, g, mask);
  });
}

}  // namespace zt::cuda::detail
