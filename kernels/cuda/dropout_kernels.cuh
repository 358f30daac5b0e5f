// Dropout kernel on the GPU, device code only (launched by dropout.cu; run on the CPU by the SIMT
// emulation tests, tests/emulation/): the mask of [Note: dropout masks] (kernels/cpu/dropout.h)
// regenerated from Philox wherever it is needed, never stored. One thread owns one Philox block,
// i.e. 4 consecutive elements of one sample, so each block of random bits is drawn once and the 4
// elements move as one vector access where the rows allow it. F32 or BF16 activations
// (docs/precision.md): the same mask either way, a bf16 result being the fp32 product rounded once.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/dropout_mask.cuh"

namespace zt::cuda::detail::dropout {

constexpr int kThreads = 256;

// out[b, j] = in[b, j] * (kept ? scale : 0) over B samples of N elements. Thread t handles Philox
// block t % blocks_per_sample of sample t / blocks_per_sample. kVec = 4 only when N % 4 == 0 and
// both pointers are act_vec4_aligned, so a block's 4 elements are one aligned vector access. T is
// the activation storage type: a bf16 result is the fp32 product rounded once.
template <typename T, int kVec>
__global__ void apply_mask(T* out, const T* in, std::int64_t B, std::int64_t N, detail::MaskParams m) {
  const std::int64_t blocks_per_sample = (N + 3) / 4;
  const std::int64_t total = B * blocks_per_sample;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < total;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t b = t / blocks_per_sample, blk = t % blocks_per_sample;
    const uint4 r =
        detail::mask_bits(m, static_cast<std::uint64_t>(m.first_sample + b), static_cast<std::uint32_t>(blk));
    const std::uint32_t bits[4] = {r.x, r.y, r.z, r.w};
    const std::int64_t j0 = blk * 4, base = b * N + j0;
    // The mask is multiplied in (not selected), so a dropped inf or NaN gives NaN, as on the CPU.
    if constexpr (kVec == 4) {
      detail::ActVec<T, 4> x = detail::ActVec<T, 4>::load(in + base);
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) x[lane] *= bits[lane] >= m.threshold ? m.scale : 0.0f;
      x.store(out + base);
    } else {
      const int n = static_cast<int>(N - j0 < 4 ? N - j0 : 4);
      for (int lane = 0; lane < n; ++lane) {
        detail::store_act(out + base + lane,
                          detail::load_act(in + base + lane) * (bits[lane] >= m.threshold ? m.scale : 0.0f));
      }
    }
  }
}

}  // namespace zt::cuda::detail::dropout
