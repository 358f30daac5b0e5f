// Launchers of the tensor-core flash attention kernels (flash_attention_tc_kernels.cuh; [Note: flash
// attention on tensor cores] in flash_attention_tc_common.cuh explains them): one instantiation per head size, the
// dynamic shared memory each needs opted into once per process before its first launch.
#include "kernels/cuda/flash_attention_tc.cuh"

#include <algorithm>
#include <type_traits>

#include "kernels/contracts/operand_checks.h"  // flash_attention_tc_head_size
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_attention_tc_kernels.cuh"

namespace zt::cuda::detail {

namespace {

using namespace tc_flash;  // NOLINT: the kernels and their constants, this file's whole subject

// Launches kKernel on a (row blocks, B * heads) grid with `bytes` of dynamic shared memory (heads:
// NH for the kernels with a block per query head, NKV for the dk/dv one). Above the
// 48 KiB default that is opted into, once per kernel (the process drives one GPU), with the
// preference for the largest shared-memory carveout so two blocks share an SM where they fit.
template <auto kKernel, typename... Args>
void launch(std::size_t bytes, cudaStream_t stream, int B, int heads, const FlashGeometry& g, Args... args) {
  static const bool configured = [bytes] {
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    ZT_CUDA_CHECK(
        cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((g.T + kRows - 1) / kRows), static_cast<unsigned>(B * heads));
  kKernel<<<grid, kThreads, bytes, stream>>>(args...);
  ZT_CUDA_CHECK_LAUNCH();
}

template <int HS>
constexpr std::size_t most_smem_bytes() {
  return std::max({forward_smem<HS>().bytes, backward_smem<HS, false>().bytes, backward_smem<HS, true>().bytes});
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

bool tc_flash_supports(int hs) {
  if (!flash_attention_tc_head_size(hs)) return false;
  // The device must grant the shared memory (sm_90: 227 KiB a block; some GPUs the PTX also serves
  // grant 99 KiB, too little at HS = 128, where the CUDA-core kernels run instead).
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();  // no device: nothing will launch, and the error must not linger
    return false;
  }
  std::size_t needed = 0;
  with_tc_head_size(hs, [&](auto size) { needed = most_smem_bytes<decltype(size)::value>(); });
  return needed <= static_cast<std::size_t>(optin);
}

void tc_flash_forward(cudaStream_t stream, bf16* out, float* lse, const bf16* qkv, int B, int hs,
                      const FlashGeometry& g, const MaskParams& mask) {
  with_tc_head_size(hs, [&](auto size) {
    constexpr int HS = decltype(size)::value;
    launch<tc_forward_kernel<HS>>(forward_smem<HS>().bytes, stream, B, g.NH, g, out, lse, qkv, g, mask);
  });
}

void tc_flash_backward(cudaStream_t stream, bf16* dqkv, const bf16* qkv, const bf16* dout, const float* lse,
                       const float* delta, int B, int hs, const FlashGeometry& g, const MaskParams& mask) {
  with_tc_head_size(hs, [&](auto size) {
    constexpr int HS = decltype(size)::value;
    launch<tc_dq_kernel<HS>>(backward_smem<HS, false>().bytes, stream, B, g.NH, g, dqkv, qkv, dout, lse, delta, g,
                             mask);
    launch<tc_dkv_kernel<HS>>(backward_smem<HS, true>().bytes, stream, B, g.NKV, g, dqkv, qkv, dout, lse, delta, g,
                              mask);
  });
}

}  // namespace zt::cuda::detail
