// The pinned host allocator: cudaHostAlloc/cudaFreeHost only when the cache has no block of the class.
#include "engine/base/device/pinned_host_allocator.h"

#include <cstring>

#include "engine/base/core/check.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/device/cuda_check.h"

namespace zt::cuda {

namespace {

void* raw_pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  ZT_CUDA_CHECK(err);
  return p;
}

}  // namespace

PinnedHostAllocator::PinnedHostAllocator()
    : cache_([](std::size_t bytes) { return raw_pinned_alloc(bytes); },
             [](void* block, std::size_t) { cudaFreeHost(block); }) {}

void* PinnedHostAllocator::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  void* block = cache_.allocate(bytes);
  if (block == nullptr) {
    throw_runtime_error("out of pinned host memory allocating {} (this process holds {})",
                        format_bytes(static_cast<std::int64_t>(bytes)), format_bytes(cache_.stats().reserved_bytes));
  }
  return block;
}

void PinnedHostAllocator::deallocate(void* block, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  cache_.deallocate(block, bytes);
}

void PinnedHostAllocator::fill_zero(void* block, std::size_t bytes) { std::memset(block, 0, bytes); }

BlockCacheStats PinnedHostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return cache_.stats();
}

}  // namespace zt::cuda
