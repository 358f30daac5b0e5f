// The explicit execution context every kernel takes: which device, how many CPU threads, and (for
// the CUDA backend) which stream. Passed by the caller, never read from globals, so two contexts
// can run side by side (the compute stream and the NCCL communicator's stream).
#pragma once

#include "engine/base/core/dtype.h"

namespace zt {

// The cuBLASLt workspace a CUDA context holds for the whole run (kernels/cuda/kernel_resources.h:
// Hopper's recommended 32 MiB), here where the memory prediction can count it in every build.
constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{32} << 20;

// The most output a CUDA run's timed kernel searches copy into scratch (KernelResources::
// timed_scratch_limit_bytes; [Note: timed algorithm search] in kernels/cuda/lt_gemm.cu), here where
// the memory check can count it in every build.
constexpr std::int64_t kTimedScratchLimitBytes = std::int64_t{64} << 20;

class DeviceAllocator;  // engine/base/core/device_allocator.h
class OpProfiler;       // kernels/op_profiler.h

namespace cuda {
class KernelResources;  // kernels/cuda/kernel_resources.h: cuBLASLt handle, workspace, scratch
}

struct ExecContext {
  Device device = Device::kCPU;
  int num_threads = 1;                              // CPU kernels: OpenMP team size (OpenBLAS is set to the same count)
  void* cuda_stream = nullptr;                      // cudaStream_t when device == kCUDA
  cuda::KernelResources* cuda_resources = nullptr;  // required by the CUDA kernels, unused on the CPU
  DeviceAllocator* allocator = nullptr;             // where ops::allocate puts a CUDA context's buffers
  // Where ops::allocate_host puts host memory the device copies to and from (a CUDA context's
  // pinned blocks); null: plain host memory.
  DeviceAllocator* host_staging = nullptr;
  // When set, kernels/ops.cpp times each op call inside the profiler's open step (log.profile_ops);
  // null (the default) costs one comparison per op.
  OpProfiler* profiler = nullptr;
  // CPU kernels: the same bits at any num_threads (train.deterministic): products in blocks of a
  // fixed size (kernels/cpu/blas.h, SgemmSplit::kFixedBlocks). false: OpenBLAS's own split, faster.
  bool thread_invariant = false;
};

}  // namespace zt
