// The bookkeeping half of the CUDA caching allocator, free of CUDA so it is tested on any machine:
// request sizes are rounded to size classes, freed blocks wait in per-class free lists and are
// handed out again for the same class. A training step allocates the same sizes every step, so
// after the first step every request is served from the cache (no cudaMalloc/cudaFree in the loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace zt::cuda {

struct BlockCacheStats {
  std::int64_t reserved_bytes = 0;  // held from the device: in use + cached
  std::int64_t cached_bytes = 0;    // idle in the free lists
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t device_allocs = 0;  // raw allocations made (cudaMalloc calls)
  std::int64_t device_frees = 0;   // raw frees made (cudaFree calls)
  std::int64_t cache_hits = 0;     // requests served from a free list
};

class BlockCache {
 public:
  // raw_alloc returns nullptr when the device is out of memory; raw_free never fails.
  using RawAlloc = std::function<void*(std::size_t bytes)>;
  using RawFree = std::function<void(void* block, std::size_t bytes)>;

  BlockCache(RawAlloc raw_alloc, RawFree raw_free) : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}
  ~BlockCache() { release_cached(); }
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Size class of a request: multiples of 512 bytes up to 1 MiB, of 2 MiB above (the classes
  // keep rounding waste under 512 B for small blocks and under 2 MiB, <1% of a large one).
  static std::size_t size_class(std::size_t bytes);

  // A block of size_class(bytes): a cached one if the class has one, else a raw allocation; if
  // that fails, every cached block is freed and the raw allocation retried once. nullptr if the
  // retry fails too (the caller reports out-of-memory with the figures from stats()).
  void* allocate(std::size_t bytes);
  // Back to its class's free list (bytes as given to allocate).
  void deallocate(void* block, std::size_t bytes);
  // Frees every idle block to the device.
  void release_cached();

  const BlockCacheStats& stats() const { return stats_; }

 private:
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  std::unordered_map<std::size_t, std::vector<void*>> free_lists_;  // size class -> idle blocks
  BlockCacheStats stats_;
};

}  // namespace zt::cuda
