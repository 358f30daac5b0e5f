// The compute backend of one process: the CPU, or one CUDA device with the stream the kernels run
// on, the caching allocator every device Buffer comes from, and the cuBLASLt resources. Whatever
// allocates through its context() (models, parameter stores, optimizers) must be destroyed first.
// The CUDA half (CudaParts, open_cuda, the cuda_* queries) is kernels/cuda/cuda_compute_backend.cpp,
// or kernels/no_cuda_backend.cpp's answers in a build without CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/base/core/memory_tracker.h"
#include "kernels/contracts/blas_description.h"
#include "kernels/exec_context.h"

namespace zt {

// The OpenBLAS library the CPU kernels use (loaded on first use), for the run's printout.
const BlasDescription& cpu_blas_description();

// CUDA devices this process can use (0 in a build without CUDA).
int cuda_device_count();
// Throws InputError when this process has no CUDA device `index` (a machine without a GPU).
void require_cuda_device(int index);
// Free memory on CUDA device `index` now; -1 when it cannot be told (a failed query, or a build
// without CUDA).
std::int64_t cuda_device_free_bytes(int index);
// One line on the CUDA backend for `zerotrain version`: built or not, and the devices visible.
std::string cuda_backend_summary();
// What a deterministic run's bits follow on CUDA device `index` beside its config, as a checkpoint
// records it: the GPU's model, compute capability and SMs, and the versions of the CUDA runtime,
// cuBLASLt (whose heuristic picks each product's algorithm by them) and cuDNN (its attention's), e.g.
// "NVIDIA H100 80GB HBM3 (sm_90), 132 SMs, CUDA runtime 12040, cuBLASLt 120403, cuDNN 90100". ""
// in a build without CUDA.
std::string cuda_kernels_identity(int index);
// The GPU of the rank with index `local_rank` among its node's ranks: one GPU per rank, wrapping
// when a node runs more ranks than it shows GPUs; 0 when it shows none (ComputeBackend refuses).
int cuda_device_for_local_rank(int local_rank);

// Which CUDA kernels run where a config gives a choice (its precision section); the CPU has one
// way each and ignores them.
struct KernelChoices {
  MatmulPrecision matmuls = MatmulPrecision::kFp32;      // how fp32 matrices are multiplied
  AttentionKernels attention = AttentionKernels::kAuto;  // cuDNN or the flash kernels
  bool gelu_epilogue = false;                            // GELU in the MLP matmuls' epilogues
  // Runs repeat bit for bit (train.deterministic): cuDNN attention's deterministic backward and
  // cuBLASLt's heuristic algorithm per product. false: cuDNN's default backward (dK and dV added in
  // any order) and the fastest of cuBLASLt's candidates as measured on the first call (faster).
  // On the CPU: products whose bits do not depend on the thread count (ExecContext::thread_invariant).
  bool deterministic = true;
};

class ComputeBackend {
 public:
  // kCPU: `num_threads` for the CPU kernels. kCUDA: device `device_index`, running the kernels
  // `choices` names; an InputError when this build has no CUDA backend, the machine no such
  // device, or choices.attention insists on a cuDNN that cannot run here.
  ComputeBackend(Device device, int num_threads, MemoryTracker& tracker, int device_index = 0,
                 KernelChoices choices = {});
  ~ComputeBackend();
  ComputeBackend(const ComputeBackend&) = delete;
  ComputeBackend& operator=(const ComputeBackend&) = delete;

  const ExecContext& context() const { return ctx_; }
  // "cpu (2 threads)" or "cuda:0 (NVIDIA H100 80GB HBM3, ...)", with ", tf32 matmuls" or
  // ", bf16 matmuls" when fp32 products are not exact and ", GELU in matmul epilogues".
  const std::string& description() const { return description_; }
  // What the CUDA kernels chose by timing so far (cuda::KernelResources::choices_summary); an empty
  // object on the CPU.
  nlohmann::json kernel_choices() const;
  // The device's memory now, beside what the caching allocator holds of it: total_bytes,
  // free_bytes, allocator_reserved_bytes (in use and cached), allocator_peak_reserved_bytes, and
  // outside_allocator_bytes (held but not by the allocator: the CUDA context, cuBLASLt's and
  // cuDNN's handles, NCCL's buffers, other processes on the GPU), which the memory prediction
  // leaves out. An empty object on the CPU or when the query fails.
  nlohmann::json device_memory() const;

 private:
  // The CUDA half of the constructor: opens device `device_index` (or refuses, naming the config
  // key) and makes ctx_ its context.
  void open_cuda(int device_index, int num_threads, MemoryTracker& tracker, const KernelChoices& choices);

  // What the CUDA half holds for the run (its CudaParts: stream, allocator, kernel resources),
  // defined in that half's file and destroyed through this base here.
  struct DeviceParts {
    virtual ~DeviceParts() = default;
  };
  struct CudaParts;
  std::unique_ptr<DeviceParts> cuda_;
  ExecContext ctx_;
  std::string description_;
};

}  // namespace zt
