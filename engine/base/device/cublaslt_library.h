// cuBLASLt, opened at run time on first use instead of linked.
//
// [Note: cuBLASLt opened on first use]
// libcublasLt is about 540 MB, and the dynamic loader's relocation pass over it cost every process
// that linked it about 25,000 page faults and 0.12 s before main (measured on a 2-core machine:
// a program that only links it starts in 0.117 s against 0.002 s). Every CPU run, every `zerotrain`
// command and every test process paid that without ever multiplying on a GPU. The CUDA kernels
// call cuBLASLt through this table instead; the library is opened (RTLD_NOW) the first time a
// CUDA device context asks for it (KernelResources), so only GPU runs pay for it, once.
//
// Plain C++17 with no fmt in the header, so .cu files (compiled as C++17) can include it.
#pragma once

#include <cublasLt.h>

namespace zt::cuda {

// The entry points zerotrain uses, typed from cublasLt.h's own declarations.
struct CublasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtGetStatusName) get_status_name;
  decltype(&::cublasLtGetStatusString) get_status_string;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) matmul_preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) matmul_preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic;
  decltype(&::cublasLtMatmulAlgoCheck) matmul_algo_check;
  decltype(&::cublasLtMatmulAlgoCapGetAttribute) matmul_algo_cap_get_attribute;
  decltype(&::cublasLtGetVersion) get_version;
};

// The library's entry points, opened once (thread-safe) on the first call. Throws zt::RuntimeError
// naming the library, where it was looked for and the loader's reason when it cannot be opened or
// lacks an entry point; every later call then throws the same.
const CublasLt& cublaslt();

// Whether cublaslt() has opened the library in this process (the tests' check that a CPU run
// never does).
bool cublaslt_opened();

}  // namespace zt::cuda
