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
  if (err != cudaSuccess) {
    cudaGetLastError();  // not left pending for the next call to find (a run's identity asks before its checks)
    return cudaGetErrorString(err);
  }
  return fmt::format("{} (sm_{}{})", prop.name, prop.major, prop.minor);
}

long long device_free_bytes(int index) {
  // `index` stays the thread's device: switching back to the one before, device 0 on a thread that
  // had chosen none, would create a context there (cudaSetDevice does at once since CUDA 12), so
  // every rank of a several-GPU run would hold one on GPU 0 from its memory check on.
  if (cudaSetDevice(index) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) cudaGetLastError();
  return err == cudaSuccess ? static_cast<long long>(free_bytes) : -1;
}

}  // namespace zt::cuda
