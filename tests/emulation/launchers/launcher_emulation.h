// The CUDA launchers under the SIMT emulator: kernels/cuda/*.cu compiled as C++ (each launch
// rewritten by rewrite_launches.py into simt::launch_on), so their host code -- the operand checks,
// the dtype and alignment dispatch, the grids, the scratch they size and the kernel variant they
// pick -- runs against the CPU kernels in every build, where the kernel-level emulation tests
// (tests/emulation/*_test.cpp) launch each kernel with a configuration written out by hand.
//
// [Note: launcher emulation]
// Force-included (-include) into every file of the target, before anything else:
// - the headers whose zt::cuda names must stay themselves (ExecContext's KernelResources pointer,
//   the resources' class and its enums), then `cuda` renamed to `cuda_emu`: the emulated launchers
//   (and the CUDA headers they include) become zt::cuda_emu's, so they never meet the real CUDA
//   objects' symbols in zt_kernels, and ExecContext is one type for both;
// - stand-ins (stubs/) for <cuda_runtime_api.h> and <cublasLt.h>: the runtime calls on host memory,
//   sm_90's device attributes, cuBLASLt's types only. KernelResources' members and CudaEvent's are
//   defined in launcher_emulation.cpp (scratch from a host allocator that reports Device::kCUDA).
// What it does not cover: the cuBLASLt products (matmul, bias_grad, the materialised attention),
// cuDNN, CUB's sort (the embedding backward), streams and events as concurrency, and timing.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "engine/base/core/device_allocator.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/cuda/norm_backward_rows.h"
#include "kernels/exec_context.h"
#include "tests/emulation/simt_runtime.h"

namespace simt {

// A launch as rewrite_launches.py writes it: run to completion before it returns (so a stream's
// order is the program's).
template <typename Stream, typename Kernel, typename... Args>
void launch_on(dim3 grid, int threads, std::size_t smem_bytes, Stream, Kernel kernel, Args... args) {
  launch(grid, threads, smem_bytes, kernel, args...);
}

}  // namespace simt

namespace zt::cuda_emu {
using ::zt::cuda::BiasGradRoute;
using ::zt::cuda::cuda_context;
using ::zt::cuda::KernelResources;
using ::zt::cuda::NormBackwardRows;
}  // namespace zt::cuda_emu

namespace zt::emulation {

// Host memory standing for the device's: the scratch Buffers the launchers take are views the
// kernels check as on the GPU.
class HostAsDevice final : public DeviceAllocator {
 public:
  Device device() const override { return Device::kCUDA; }
  void* allocate(std::size_t bytes) override { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
  void deallocate(void* block, std::size_t) noexcept override { std::free(block); }
  void fill_zero(void* block, std::size_t bytes) override { std::memset(block, 0, bytes); }
};

}  // namespace zt::emulation

#define cuda cuda_emu
