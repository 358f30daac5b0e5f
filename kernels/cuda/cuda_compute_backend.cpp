// ComputeBackend's CUDA half: the parts are built in the order their users need them and
// destroyed in reverse (resources, then the allocator that served them, then the stream both order
// work on); the device queries behind cuda_device_count and the version line.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "engine/base/core/check.h"
#include "engine/base/device/cublaslt_library.h"
#include "engine/base/device/cuda_allocator.h"
#include "engine/base/device/cuda_stream.h"
#include "engine/base/device/pinned_host_allocator.h"
#include "kernels/compute_backend.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/kernel_resources.h"

namespace zt {

struct ComputeBackend::CudaParts final : DeviceParts {
  cuda::PinnedHostAllocator pinned;  // first: its blocks outlive every copy the stream queued
  cuda::CudaStream stream;
  cuda::CudaCachingAllocator allocator;
  cuda::KernelResources resources;
  CudaParts(int device, MemoryTracker& tracker)
      : stream(device), allocator(device, stream.get()), resources(tracker, allocator) {}
  // Nothing queued may outlive the memory it uses. Not stream.synchronize(), which throws: after a
  // sticky device error (an illegal address) the sync fails again while that error unwinds, and a
  // throw from this destructor then ended the process in std::terminate, its own error unsaid.
  ~CudaParts() override {
    if (const cudaError_t e = cudaStreamSynchronize(stream.get());
        e != cudaSuccess && std::uncaught_exceptions() == 0) {
      std::fprintf(stderr, "zerotrain: the device's stream failed at shutdown: %s\n", cudaGetErrorString(e));
    }
  }
};

int cuda_device_count() { return cuda::device_count(); }

std::int64_t cuda_device_free_bytes(int index) { return static_cast<std::int64_t>(cuda::device_free_bytes(index)); }

nlohmann::json ComputeBackend::kernel_choices() const {
  if (!cuda_) return nlohmann::json::object();
  return static_cast<const CudaParts&>(*cuda_).resources.choices_summary();
}

nlohmann::json ComputeBackend::device_memory() const {
  if (!cuda_) return nlohmann::json::object();
  const auto& parts = static_cast<const CudaParts&>(*cuda_);
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {  // the calling thread's device: the backend's
    cudaGetLastError();
    return nlohmann::json::object();
  }
  const cuda::BlockCacheStats held = parts.allocator.stats();
  const auto total = static_cast<std::int64_t>(total_bytes), available = static_cast<std::int64_t>(free_bytes);
  return {{"total_bytes", total},
          {"free_bytes", available},
          {"allocator_reserved_bytes", held.reserved_bytes},
          {"allocator_peak_reserved_bytes", held.peak_reserved_bytes},
          {"outside_allocator_bytes", total - available - held.reserved_bytes}};
}

std::string cuda_backend_summary() {
  const int n = cuda::device_count();
  return fmt::format("cuda: built; {} device(s) visible{}", n,
                     n > 0 ? ": " + cuda::device_description(0) : " (" + cuda::device_count_error() + ")");
}

std::string cuda_kernels_identity(int index) {
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) cudaGetLastError();
  std::string cublaslt;
  try {
    cublaslt = fmt::format("cuBLASLt {}", cuda::cublaslt().get_version());
  } catch (const std::exception&) {  // the products will refuse to run, saying why
    cublaslt = "no cuBLASLt";
  }
  // The SMs too: cuBLASLt's heuristic weighs them, and MPS or a MIG slice runs the same model with
  // fewer.
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index) != cudaSuccess) cudaGetLastError();
  return fmt::format("{}, {} SMs, CUDA runtime {}, {}, {}", cuda::device_description(index), sms, runtime, cublaslt,
                     cuda::cudnn_library_version());
}

void ComputeBackend::open_cuda(int device_index, int num_threads, MemoryTracker& tracker,
                               const KernelChoices& choices) {
  const MatmulPrecision matmuls = choices.matmuls;
  const AttentionKernels attention = choices.attention;
  require_cuda_device(device_index);
  if (attention == AttentionKernels::kCudnn && !cuda::cudnn_attention_unavailable().empty()) {
    throw_input_error("precision.attention = \"cudnn\": {} (\"auto\" runs the flash kernels instead)",
                      cuda::cudnn_attention_unavailable());
  }
  auto parts = std::make_unique<CudaParts>(device_index, tracker);
  parts->resources.fp32_matmuls = matmuls;
  parts->resources.attention = attention;
  parts->resources.gelu_epilogue = choices.gelu_epilogue;
  parts->resources.deterministic_attention = choices.deterministic;
  parts->resources.timed_gemm_search = !choices.deterministic;
  parts->resources.bias_grad_route =
      choices.deterministic ? cuda::BiasGradRoute::kKernels : cuda::BiasGradRoute::kFastest;
  parts->resources.norm_backward_rows =
      choices.deterministic ? cuda::NormBackwardRows::kBlock : cuda::NormBackwardRows::kFastest;
  ctx_ = cuda::cuda_context(parts->stream.get(), parts->resources);
  ctx_.host_staging = &parts->pinned;
  cuda_ = std::move(parts);
  ctx_.num_threads = num_threads;
  description_ =
      fmt::format("cuda:{} ({}){}{}", device_index, cuda::device_description(device_index),
                  matmuls == MatmulPrecision::kFp32 ? "" : fmt::format(", {} matmuls", matmul_precision_name(matmuls)),
                  choices.gelu_epilogue ? ", GELU in matmul epilogues" : "");
}

}  // namespace zt
