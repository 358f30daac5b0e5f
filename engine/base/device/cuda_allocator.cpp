// The CUDA caching allocator: cudaMalloc/cudaFree only when the cache has no block of the class.
#include "engine/base/device/cuda_allocator.h"

#include "engine/base/core/check.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/device/cuda_check.h"

namespace zt::cuda {

namespace {

void* raw_device_alloc(int device, std::size_t bytes) {
  ZT_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky, but clear it so the next check does not see it
    return nullptr;
  }
  ZT_CUDA_CHECK(err);
  return p;
}

}  // namespace

CudaCachingAllocator::CudaCachingAllocator(int device, cudaStream_t stream)
    : device_(device),
      stream_(stream),
      cache_([device](std::size_t bytes) { return raw_device_alloc(device, bytes); },
             // cudaFree waits for the device, so a block freed while kernels still use it is safe.
             [](void* block, std::size_t) { cudaFree(block); }) {}

void* CudaCachingAllocator::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  void* block = cache_.allocate(bytes);
  if (block == nullptr) {
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const BlockCacheStats& s = cache_.stats();
    throw_runtime_error(
        "out of GPU memory allocating {} on device {}: this process holds {} ({} idle in its cache), "
        "the device has {} free of {}",
        format_bytes(static_cast<std::int64_t>(bytes)), device_, format_bytes(s.reserved_bytes),
        format_bytes(s.cached_bytes), format_bytes(static_cast<std::int64_t>(free_bytes)),
        format_bytes(static_cast<std::int64_t>(total_bytes)));
  }
  return block;
}

void CudaCachingAllocator::deallocate(void* block, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  cache_.deallocate(block, bytes);  // see [Note: stream-ordered reuse]
}

void CudaCachingAllocator::fill_zero(void* block, std::size_t bytes) {
  ZT_CUDA_CHECK(cudaMemsetAsync(block, 0, bytes, stream_));
}

void CudaCachingAllocator::release_cached() {
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::lock_guard lock(mutex_);
  cache_.release_cached();
}

BlockCacheStats CudaCachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return cache_.stats();
}

}  // namespace zt::cuda
