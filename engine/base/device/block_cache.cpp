// Size-class free lists for the CUDA caching allocator (host-only logic; see block_cache.h).
#include "engine/base/device/block_cache.h"

#include <algorithm>

namespace zt::cuda {

namespace {
constexpr std::size_t kSmallGranule = 512;
constexpr std::size_t kLargeThreshold = std::size_t{1} << 20;
constexpr std::size_t kLargeGranule = std::size_t{2} << 20;

std::size_t round_up(std::size_t x, std::size_t m) { return (x + m - 1) / m * m; }
}  // namespace

std::size_t BlockCache::size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  return bytes <= kLargeThreshold ? round_up(bytes, kSmallGranule) : round_up(bytes, kLargeGranule);
}

void* BlockCache::allocate(std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  if (auto it = free_lists_.find(cls); it != free_lists_.end() && !it->second.empty()) {
    void* block = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= static_cast<std::int64_t>(cls);
    ++stats_.cache_hits;
    return block;
  }
  void* block = raw_alloc_(cls);
  if (block == nullptr && stats_.cached_bytes > 0) {
    release_cached();  // idle blocks of other classes may be what the device is missing
    block = raw_alloc_(cls);
  }
  if (block == nullptr) return nullptr;
  ++stats_.device_allocs;
  stats_.reserved_bytes += static_cast<std::int64_t>(cls);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return block;
}

void BlockCache::deallocate(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  const std::size_t cls = size_class(bytes);
  free_lists_[cls].push_back(block);
  stats_.cached_bytes += static_cast<std::int64_t>(cls);
}

void BlockCache::release_cached() {
  for (auto& [cls, blocks] : free_lists_) {
    for (void* b : blocks) {
      raw_free_(b, cls);
      ++stats_.device_frees;
      stats_.reserved_bytes -= static_cast<std::int64_t>(cls);
      stats_.cached_bytes -= static_cast<std::int64_t>(cls);
    }
    blocks.clear();
  }
}

}  // namespace zt::cuda
