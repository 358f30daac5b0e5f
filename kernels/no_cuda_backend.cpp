// The CUDA backend's registration in a build without CUDA (CMake compiles it instead of
// kernels/cuda/): there is none, so kernels/ops refuses a CUDA context and answers the capability
// queries for CUDA with "no", without an #ifdef of its own.
#include "kernels/cuda/cuda_backend.h"

namespace zt::cuda {

const OpsBackend* ops_backend() { return nullptr; }

}  // namespace zt::cuda
