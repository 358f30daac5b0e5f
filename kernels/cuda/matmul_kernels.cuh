// The linear layer's bias-gradient kernels on the GPU, device code only (launched by matmul.cu; run
// on the CPU by the SIMT emulation tests, tests/emulation/): a two-stage column sum, each chunk of
// rows summed in row order, then the chunk partials in chunk order, so the result is deterministic
// and accumulates (+=) into dbias like the CPU's.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::matmul {

constexpr int kBiasRowsPerChunk = 256;
constexpr int kBiasThreads = 256;

// partials[chunk, c] = sum over the chunk's rows (in order) of dout[row, c] (T: the activation
// storage type, widened by load_act).
template <typename T>
__global__ void bias_grad_partials(float* partials, const T* dout, std::int64_t N, int OC) {
  const int c = blockIdx.x * kBiasThreads + threadIdx.x;
  if (c >= OC) return;
  const std::int64_t r0 = blockIdx.y * std::int64_t{kBiasRowsPerChunk};
  const std::int64_t r1 = r0 + kBiasRowsPerChunk < N ? r0 + kBiasRowsPerChunk : N;
  float acc = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) acc += detail::load_act(dout + r * OC + c);
  partials[blockIdx.y * std::int64_t{OC} + c] = acc;
}

__global__ void bias_grad_accumulate(float* dbias, const float* partials, int num_chunks, int OC) {
  const int c = blockIdx.x * kBiasThreads + threadIdx.x;
  if (c >= OC) return;
  float acc = 0.0f;
  for (int k = 0; k < num_chunks; ++k) acc += partials[std::int64_t{k} * OC + c];  // chunk order
  dbias[c] += acc;
}

}  // namespace zt::cuda::detail::matmul
