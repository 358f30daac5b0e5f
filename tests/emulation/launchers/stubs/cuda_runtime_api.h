// Stand-in for <cuda_runtime_api.h> in the launcher emulation (launcher_emulation.h): the runtime
// calls the launchers make, on host memory standing for the device's (launches run to completion,
// so a stream's order is the program's), and the device attributes of sm_90 (an H100).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstring>

#include "tests/emulation/simt/cuda_runtime.h"  // cudaStream_t

enum cudaError_t { cudaSuccess = 0 };
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlockOptin,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor,
  cudaDevAttrReservedSharedMemoryPerBlock,
  cudaDevAttrMultiProcessorCount
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize, cudaFuncAttributePreferredSharedMemoryCarveout };
constexpr int cudaSharedmemCarveoutMaxShared = 100;
using cudaEvent_t = struct CUevent_st*;

inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated"; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaSuccess"; }
inline cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t = nullptr) {
  std::memset(p, value, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind, cudaStream_t = nullptr) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = 1024; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
  }
  return cudaSuccess;
}
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}
