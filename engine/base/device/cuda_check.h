// ZT_CUDA_CHECK: every CUDA runtime and cuBLAS(Lt) call goes through it, so a failure names the
// file:line, the call as written and the library's own error name and text. One macro for both
// libraries (overloads on the status type) keeps the error family to one spelling.
// Plain C++17 with no fmt in the header, so .cu files (compiled as C++17) can include it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace zt::cuda::detail {

// Throw zt::RuntimeError("<file>:<line>: <call> failed: <name> (<text>)").
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}
inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

}  // namespace zt::cuda::detail

// ZT_CUDA_CHECK(cudaMemcpyAsync(...)) or ZT_CUDA_CHECK(cublaslt().matmul(...)).
#define ZT_CUDA_CHECK(call) ::zt::cuda::detail::check((call), #call, __FILE__, __LINE__)

// After a kernel launch: a bad configuration is reported at the launch site, not at a later sync.
#define ZT_CUDA_CHECK_LAUNCH() ZT_CUDA_CHECK(cudaGetLastError())
