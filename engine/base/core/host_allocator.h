// Host memory for Buffers, with a cache of freed blocks keyed by size. A training step frees and
// re-allocates the same activation sizes every step; without the cache each one is a fresh mmap
// whose pages fault in and are zeroed by the kernel (measured ~10% of a CPU step). Idle cached
// blocks are not "in use" for the MemoryTracker; host_cached_bytes() reports them separately.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt {

// 64-byte aligned block of at least `bytes` (the size class is what host_free must be given).
void* host_alloc(std::size_t bytes);
void host_free(void* block, std::size_t bytes);

// Bytes held idle in the cache, and a way to return them to the system.
std::int64_t host_cached_bytes();
void host_release_cached();

}  // namespace zt
