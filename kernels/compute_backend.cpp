// ComputeBackend: the CUDA parts are built in the order their users need them and destroyed in
// reverse (resources, then the allocator that served them, then the stream both order work on).
#include "kernels/compute_backend.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "kernels/cpu/blas.h"
#ifdef ZT_HAVE_CUDA
#include "engine/base/device/cuda_allocator.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/kernel_resources.h"
#endif

namespace zt {

#ifdef ZT_HAVE_CUDA
struct ComputeBackend::CudaParts {
  cuda::CudaStream stream;
  cuda::CudaCachingAllocator allocator;
  cuda::KernelResources resources;
  CudaParts(int device, MemoryTracker& tracker)
      : stream(device), allocator(device, stream.get()), resources(tracker, allocator) {}
  ~CudaParts() { stream.synchronize(); }  // nothing queued may outlive the memory it uses
};
#else
struct ComputeBackend::CudaParts {};
#endif

const BlasDescription& cpu_blas_description() { return cpu::blas_info(); }

int cuda_device_count() {
#ifdef ZT_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::int64_t cuda_device_free_bytes(int index) {
#ifdef ZT_HAVE_CUDA
  return static_cast<std::int64_t>(cuda::device_free_bytes(index));
#else
  (void)index;
  return -1;
#endif
}

std::string cuda_backend_summary() {
#ifdef ZT_HAVE_CUDA
  const int n = cuda::device_count();
  return fmt::format("cuda: built; {} device(s) visible{}", n,
                     n > 0 ? ": " + cuda::device_description(0) : " (" + cuda::device_count_error() + ")");
#else
  return "cuda: not built (nvcc not found at configure time)";
#endif
}

int cuda_device_for_local_rank(int local_rank) {
  const int count = cuda_device_count();
  return count > 0 ? local_rank % count : 0;
}

ComputeBackend::ComputeBackend(Device device, int num_threads, MemoryTracker& tracker, int device_index,
                               KernelChoices choices) {
  const MatmulPrecision matmuls = choices.matmuls;
  const AttentionKernels attention = choices.attention;
  ctx_.num_threads = num_threads;
  if (device == Device::kCPU) {
    description_ = fmt::format("cpu ({} thread{})", num_threads, num_threads == 1 ? "" : "s");
    return;
  }
#ifdef ZT_HAVE_CUDA
  const int count = cuda::device_count();
  if (device_index < 0 || device_index >= count) {
    throw_input_error("device = \"cuda\": CUDA device {} requested, but this machine has {} CUDA device(s)",
                      device_index, count);
  }
  if (attention == AttentionKernels::kCudnn && !cuda::cudnn_attention_unavailable().empty()) {
    throw_input_error("precision.attention = \"cudnn\": {} (\"auto\" runs the flash kernels instead)",
                      cuda::cudnn_attention_unavailable());
  }
  cuda_ = std::make_unique<CudaParts>(device_index, tracker);
  cuda_->resources.fp32_matmuls = matmuls;
  cuda_->resources.attention = attention;
  cuda_->resources.gelu_epilogue = choices.gelu_epilogue;
  cuda_->resources.deterministic_attention = choices.deterministic;
  cuda_->resources.timed_gemm_search = !choices.deterministic;
  ctx_ = cuda::cuda_context(cuda_->stream.get(), cuda_->resources);
  ctx_.num_threads = num_threads;
  description_ =
      fmt::format("cuda:{} ({}){}{}", device_index, cuda::device_description(device_index),
                  matmuls == MatmulPrecision::kFp32 ? "" : fmt::format(", {} matmuls", matmul_precision_name(matmuls)),
                  choices.gelu_epilogue ? ", GELU in matmul epilogues" : "");
#else
  (void)tracker;
  (void)device_index;
  (void)matmuls;
  (void)attention;
  throw_input_error("device = \"cuda\": this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
}

ComputeBackend::~ComputeBackend() = default;

}  // namespace zt
