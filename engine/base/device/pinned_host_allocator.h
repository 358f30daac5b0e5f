// Page-locked host memory for Buffers, cached by size class (BlockCache): what a GPU copies to and
// from asynchronously. cudaHostAlloc and cudaFreeHost are slow (cudaFreeHost waits for the device),
// so blocks are kept for reuse, as the device allocator keeps device blocks. The staged
// communicator's host staging comes from here; reuse is safe by its copy-stream order ([Note:
// staging reuse without fences] in engine/distributed/comm/staged_communicator.h).
#pragma once

#include <mutex>

#include "engine/base/core/device_allocator.h"
#include "engine/base/device/block_cache.h"

namespace zt::cuda {

class PinnedHostAllocator final : public DeviceAllocator {
 public:
  PinnedHostAllocator();
  ~PinnedHostAllocator() override = default;

  Device device() const override { return Device::kCPU; }  // host memory, addressable by the host
  void* allocate(std::size_t bytes) override;
  void deallocate(void* block, std::size_t bytes) noexcept override;
  void fill_zero(void* block, std::size_t bytes) override;

  BlockCacheStats stats() const;

 private:
  mutable std::mutex mutex_;
  BlockCache cache_;
};

}  // namespace zt::cuda
