// CUDA device query through the runtime API.
#include "kernels/cuda/device_query.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace zt::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_count_error() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess) return {};
  cudaGetLastError();
  return fmt::format("{}: {}", cudaGetErrorName(err), cudaGetErrorString(err));
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  return fmt::format("{} (sm_{}{})", prop.name, prop.major, prop.minor);
}

}  // namespace zt::cuda
