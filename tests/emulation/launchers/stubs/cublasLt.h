// Stand-in for <cublasLt.h> in the launcher emulation (launcher_emulation.h): only the types the
// launchers' headers name (KernelResources' handle and algorithm cache, ZT_CUDA_CHECK's status),
// laid out as cuBLASLt's. No product runs under emulation.
#pragma once

#include <cstdint>

enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
using cublasLtHandle_t = struct cublasLtContext*;
struct cublasLtMatmulAlgo_t {
  std::uint64_t data[8];
};
