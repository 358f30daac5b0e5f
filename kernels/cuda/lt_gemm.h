// Internal to the CUDA kernels: one cuBLASLt matrix product (optionally strided-batched) with the
// epilogue, workspace and heuristic handling in one place, for matmul and attention.
#pragma once

#include <cstdint>

#include <cublasLt.h>

#include "engine/base/core/buffer.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/exec_context.h"

namespace zt::cuda::detail {

// One cuBLASLt product in column-major terms: D[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, C
// D itself unless given.
struct LtGemm {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* A = nullptr;
  std::int64_t lda = 0;
  const void* B = nullptr;
  std::int64_t ldb = 0;
  void* D = nullptr;
  std::int64_t ldd = 0;
  // Where beta is not 0: what is added, in D's layout and type (nullptr: D, in place). Apart from D
  // (a residual added in the epilogue), a rerun writes the same D.
  const void* C = nullptr;
  cudaDataType_t ab_type = CUDA_R_32F, d_type = CUDA_R_32F;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // [m] (BGRADB: [n]), d_type: the bias, or the bias gradient's output
  void* aux = nullptr;         // [m, n] column-major, ld = m, d_type (GELU input)
  float alpha = 1.0f;
  // Strided batch: batch_count products, operand i at A + i * stride_a elements (and B, D alike).
  int batch_count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

// Queues g on ctx's stream, D into g.D.
void run_gemm(const ExecContext& ctx, const LtGemm& g);

// g, or false where cuBLASLt refuses it (no algorithm for an optional epilogue such as the bias
// gradient's, or none that writes out of place): then g.D is untouched unless g.C is given (a first
// call's search may have timed its candidates there). `out`, where given, is scratch of D's layout
// that receives D instead of g.D, which is then C only (read where beta is not 0; g.C must be
// empty): out of place, for timing a product that adds into g.D; a first call's algorithm search
// times its candidates there too.
bool run_gemm_if_supported(const ExecContext& ctx, const LtGemm& g, void* out = nullptr);

// Scratch of g's output type for its first `columns` columns (ldd elements each): where a timed
// run of a product that adds into g.D writes instead ([Note: timed algorithm search]).
Buffer output_scratch(const ExecContext& ctx, const LtGemm& g, std::int64_t columns);

// Whether all of g's output fits KernelResources::timed_scratch_limit_bytes (an unbatched g).
bool output_fits_scratch(const ExecContext& ctx, const LtGemm& g);

// g's product configuration: every value its descriptors and preferences are made of (pointers
// through their alignments), the key of KernelResources' per-configuration choices.
KernelResources::GemmKey gemm_key(const ExecContext& ctx, const LtGemm& g);

}  // namespace zt::cuda::detail
