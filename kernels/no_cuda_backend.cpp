// What a build without CUDA has in place of kernels/cuda/ (CMake compiles this file instead): no
// CUDA OpsBackend, so kernels/ops refuses a CUDA context and answers the capability queries for
// CUDA with "no"; and ComputeBackend's CUDA half, which sees no devices and refuses device =
// "cuda" naming the key. Neither kernels/ops.cpp nor kernels/compute_backend.cpp needs an #ifdef.
#include "engine/base/core/check.h"
#include "kernels/compute_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace zt {

namespace cuda {
const OpsBackend* ops_backend() { return nullptr; }
}  // namespace cuda

int cuda_device_count() { return 0; }

std::int64_t cuda_device_free_bytes(int) { return -1; }

std::string cuda_backend_summary() { return "cuda: not built (" ZT_NO_CUDA_REASON ")"; }

std::string cuda_kernels_identity(int) { return ""; }

void ComputeBackend::open_cuda(int, int, MemoryTracker&, const KernelChoices&) {
  throw_input_error("device = \"cuda\": this build has no CUDA backend (" ZT_NO_CUDA_REASON ")");
}

nlohmann::json ComputeBackend::kernel_choices() const { return nlohmann::json::object(); }

nlohmann::json ComputeBackend::device_memory() const { return nlohmann::json::object(); }

}  // namespace zt
