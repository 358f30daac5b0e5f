// The throwing half of ZT_CUDA_CHECK (out of line: keeps fmt out of the C++17 .cu translation units).
#include "engine/base/device/cuda_check.h"

#include "engine/base/core/check.h"
#include "engine/base/device/cublaslt_library.h"

namespace zt::cuda::detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // A sticky error (illegal address, trap) poisons the context; clearing the last error here only
  // stops it being reported twice, the context stays unusable.
  cudaGetLastError();
  throw_runtime_error("{}:{}: {} failed: {} ({})", file, line, call, cudaGetErrorName(err), cudaGetErrorString(err));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw_runtime_error("{}:{}: {} failed: {} ({})", file, line, call, cublaslt().get_status_name(status),
                      cublaslt().get_status_string(status));
}

}  // namespace zt::cuda::detail
