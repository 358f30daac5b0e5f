// ComputeBackend's device-neutral half: the CPU's context and description, and which GPU a rank
// takes. The CUDA half is kernels/cuda/cuda_compute_backend.cpp (or kernels/no_cuda_backend.cpp's
// refusals), chosen by CMake, so this file needs no #ifdef.
#include "kernels/compute_backend.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "kernels/cpu/blas.h"

namespace zt {

const BlasDescription& cpu_blas_description() { return cpu::blas_info(); }

void require_cuda_device(int index) {
  const int count = cuda_device_count();
  if (index < 0 || index >= count) {
    throw_input_error("device = \"cuda\": CUDA device {} requested, but this machine has {} CUDA device(s)", index,
                      count);
  }
}

int cuda_device_for_local_rank(int local_rank) {
  const int count = cuda_device_count();
  return count > 0 ? local_rank % count : 0;
}

ComputeBackend::ComputeBackend(Device device, int num_threads, MemoryTracker& tracker, int device_index,
                               KernelChoices choices) {
  ctx_.num_threads = num_threads;
  if (device == Device::kCPU) {
    ctx_.thread_invariant = choices.deterministic;
    description_ = fmt::format("cpu ({} thread{})", num_threads, num_threads == 1 ? "" : "s");
    return;
  }
  open_cuda(device_index, num_threads, tracker, choices);
}

ComputeBackend::~ComputeBackend() = default;

}  // namespace zt
