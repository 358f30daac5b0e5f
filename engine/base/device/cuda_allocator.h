// Device memory for Buffers on the GPU: a caching allocator over cudaMalloc (BlockCache does the
// bookkeeping). Buffer charges the MemoryTracker as on the CPU; blocks idle in the cache are not
// "in use" and are reported by stats(), like host_cached_bytes() for host memory.
#pragma once

#include <mutex>

#include <cuda_runtime_api.h>

#include "engine/base/core/device_allocator.h"
#include "engine/base/device/block_cache.h"

namespace zt::cuda {

// [Note: stream-ordered reuse]
// A freed block goes straight back to the free list, although kernels that use it may still be
// queued. That is safe because every user of this allocator submits its work to one stream (the
// allocator's `stream`): the next owner's kernels are queued behind the previous owner's. Work on
// another stream that touches a Buffer must be fenced with an event before the Buffer is freed
// (as torch's record_stream): the NCCL communicator's stream does so, returning a collective's
// staging only once the compute stream waits for the collective (Staging in nccl_communicator.cpp).
class CudaCachingAllocator final : public DeviceAllocator {
 public:
  // Allocates on `device` (made current for each cudaMalloc); fills and frees are ordered on `stream`.
  CudaCachingAllocator(int device, cudaStream_t stream);
  ~CudaCachingAllocator() override = default;

  Device device() const override { return Device::kCUDA; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* block, std::size_t bytes) noexcept override;
  void fill_zero(void* block, std::size_t bytes) override;

  // Waits for the stream, then returns every idle block to the driver.
  void release_cached();
  BlockCacheStats stats() const;
  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_;
  mutable std::mutex mutex_;  // Buffers may be freed from a communication thread
  BlockCache cache_;
};

}  // namespace zt::cuda
