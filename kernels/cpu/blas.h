// The engine's door to OpenBLAS. The library is loaded at run time (dlopen) so that the CPU core
// type can be chosen *before* OpenBLAS initialises: Debian's DYNAMIC_ARCH build misdetects our
// virtualised Xeons as Prescott and runs sgemm ~5x slower. See [Note: OpenBLAS core type].
#pragma once

#include "kernels/contracts/blas_description.h"

namespace zt::cpu {

using BlasInfo = BlasDescription;

// Loads OpenBLAS on first use; throws RuntimeError if no OpenBLAS library can be loaded.
const BlasInfo& blas_info();

// How a product is shared among threads. [Note: products the same at any thread count]
enum class SgemmSplit {
  kLibrary,      // OpenBLAS's own split: the fastest; the last bits depend on the thread count
  kFixedBlocks,  // C in blocks of a fixed size, each one single-threaded sgemm: the same bits at any count
};

// Row-major C[M, N] = alpha * op(A)[M, K] @ op(B)[K, N] + beta * C, on `threads` threads.
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc, int threads, SgemmSplit split = SgemmSplit::kLibrary);

}  // namespace zt::cpu
