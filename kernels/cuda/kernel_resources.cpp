// cuBLASLt handle and workspace creation; scratch buffers from the caching allocator.
#include "kernels/cuda/kernel_resources.h"

#include "engine/base/device/cuda_check.h"

namespace zt::cuda {

KernelResources::KernelResources(MemoryTracker& tracker, DeviceAllocator& allocator, std::size_t cublas_workspace_bytes)
    : tracker_(tracker), allocator_(allocator) {
  ZT_CHECK(allocator.device() == Device::kCUDA, "KernelResources needs a CUDA allocator");
  ZT_CUDA_CHECK(cublasLtCreate(&cublaslt_));
  workspace_ = Buffer(tracker_, MemCategory::kWorkspace, DType::kU16,
                      static_cast<std::int64_t>(cublas_workspace_bytes / 2), allocator_,  // U16: no byte dtype
                      /*zero_fill=*/false);
}

KernelResources::~KernelResources() {
  if (cublaslt_ != nullptr) cublasLtDestroy(cublaslt_);
}

Buffer KernelResources::scratch(DType dtype, std::int64_t numel) {
  return Buffer(tracker_, MemCategory::kWorkspace, dtype, numel, allocator_, /*zero_fill=*/false);
}

}  // namespace zt::cuda
