// The CUDA OpsBackend: every op on ctx's stream through the kernels of this folder, and the
// choices only CUDA has (cuDNN or flash attention per call, GELU in cuBLASLt's epilogue).
// kernels/ops chooses it for a context whose device is CUDA.
#pragma once

#include "kernels/contracts/ops_backend.h"

namespace zt::cuda {

// The one CUDA backend (stateless: stream and resources come with each call's context), or null in
// a build without CUDA (kernels/no_cuda_backend.cpp defines it then, so kernels/ops has no #ifdef).
const OpsBackend* ops_backend();

}  // namespace zt::cuda
