// Dropout kernel on the GPU, device code only (launched by dropout.cu; run on the CPU by the SIMT
// emulation tests, tests/emulation/): the mask of [Note: dropout masks] (kernels/contracts/dropout_spec.h)
// regenerated from Philox wherever it is needed, never stored. One thread owns whole Philox blocks
// of 4 consecutive elements of one sample (one block, or two for 8-wide bf16 accesses), so each
// block of random bits is drawn once and the elements move as one 16-byte access where the rows
// allow it. F32 or BF16 activations
// (docs/precision.md): the same mask either way, a bf16 result being the fp32 product rounded once.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/dropout_mask.cuh"

namespace zt::cuda::detail::dropout {

constexpr int kThreads = 256;

// Elements a thread owns for access width kVec: whole Philox blocks of 4.
template <int kVec>
inline constexpr int kElementsPerThread = kVec > 4 ? kVec : 4;

// out[b, j] = in[b, j] * (kept ? scale : 0) over B samples of N elements. Thread t handles group
// t % groups_per_sample (kElementsPerThread elements) of sample t / groups_per_sample. kVec > 1
// only when N % kVec == 0 and both pointers are aligned16, so a group is one aligned vector
// access; kVec = 1 moves its 4 elements one by one. T is the activation storage type: a bf16
// result is the fp32 product rounded once.
template <typename T, int kVec>
__global__ void apply_mask(T* out, const T* in, std::int64_t B, std::int64_t N, detail::MaskParams m) {
  constexpr int kPer = kElementsPerThread<kVec>;
  const std::int64_t groups_per_sample = (N + kPer - 1) / kPer;
  const std::int64_t total = B * groups_per_sample;
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < total;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t b = t / groups_per_sample, group = t % groups_per_sample;
    float keep[kPer];
#pragma unroll
    for (int h = 0; h < kPer / 4; ++h) {
      const auto blk = static_cast<std::uint32_t>(group * (kPer / 4) + h);
      const uint4 r = detail::mask_bits(m, static_cast<std::uint64_t>(m.first_sample + b), blk);
      const std::uint32_t bits[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) keep[4 * h + i] = bits[i] >= m.threshold ? m.scale : 0.0f;
    }
    const std::int64_t j0 = group * kPer, base = b * N + j0;
    // The mask is multiplied in (not selected), so a dropped inf or NaN gives NaN, as on the CPU.
    if constexpr (kVec > 1) {
      detail::ActVec<T, kVec> x = detail::ActVec<T, kVec>::load(in + base);
#pragma unroll
      for (int i = 0; i < kVec; ++i) x[i] *= keep[i];
      x.store(out + base);
    } else {
      const int n = static_cast<int>(N - j0 < kPer ? N - j0 : kPer);
      for (int i = 0; i < n; ++i) detail::store_act(out + base + i, detail::load_act(in + base + i) * keep[i]);
    }
  }
}

}  // namespace zt::cuda::detail::dropout
