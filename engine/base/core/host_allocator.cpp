// Size-class cache over aligned_alloc. Blocks are rounded up to 64 bytes (4 KiB above 1 MiB, so
// slightly different sizes share a class); a freed block waits in its class's free list until a
// request of the same class takes it. The cache is bounded: past kMaxCachedBytes, frees go to the
// system.
#include "engine/base/core/host_allocator.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace zt {

namespace {

constexpr std::size_t kMaxCachedBytes = std::size_t{4} << 30;

struct Cache {
  std::mutex mu;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
  std::size_t cached_bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: Buffers may be freed during static destruction
  return *c;
}

std::size_t size_class(std::size_t bytes) {
  const std::size_t align = bytes > (std::size_t{1} << 20) ? 4096 : 64;
  return (bytes + align - 1) / align * align;
}

}  // namespace

void* host_alloc(std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      c.cached_bytes -= cls;
      return block;
    }
  }
  return std::aligned_alloc(64, cls);
}

void host_free(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  const std::size_t cls = size_class(bytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.cached_bytes + cls > kMaxCachedBytes) {
    std::free(block);
    return;
  }
  c.free_blocks[cls].push_back(block);
  c.cached_bytes += cls;
}

std::int64_t host_cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return static_cast<std::int64_t>(c.cached_bytes);
}

void host_release_cached() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [cls, blocks] : c.free_blocks) {
    for (void* b : blocks) std::free(b);
  }
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

}  // namespace zt
